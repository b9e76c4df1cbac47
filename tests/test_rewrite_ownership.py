"""What `tileblend rewrite` cannot own: bindings it cannot tell apart, definitions it would shadow, files under two
names and comments it replaces. Each stops the rewrite with one line and writes nothing, or is reported."""

import pytest
from test_rewrite_code import VAE, files_of, line_of, make_tree

from tileblend.cli import main as tileblend


def refused(tmp_path, capsys, *args) -> str:
    """The one error line of a rewrite of `tmp_path` that must stop (exit 2) and write nothing."""
    before = files_of(tmp_path)
    capsys.readouterr()
    assert tileblend(["rewrite", str(tmp_path), *args]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and files_of(tmp_path) == before
    return err


SECOND_MIXIN = {
    "class": "class AutoencoderMixin:\n    pass\n",
    "assignment": "AutoencoderMixin = DecoderOutput\n",
    "import": "from torch.nn import Module as AutoencoderMixin\n",
}


@pytest.mark.parametrize("inherit", [[], ["--inherit"]], ids=["copies", "inherit"])
@pytest.mark.parametrize("second", SECOND_MIXIN.values(), ids=SECOND_MIXIN.keys())
def test_a_mixin_bound_twice_is_refused(tmp_path, capsys, second, inherit):
    """vae.py binding `AutoencoderMixin` twice at module level: which one the models derive from depends on the
    order the module runs, so the rewrite stops, naming the second binding."""
    autoencoders = make_tree(tmp_path)
    vae = VAE + "\n\n" + second
    (autoencoders / "vae.py").write_text(vae)
    err = refused(tmp_path, capsys, *inherit)
    assert f"vae.py: line {line_of(vae, second)}: AutoencoderMixin is bound more than once at module level" in err
