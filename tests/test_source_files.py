"""`tileblend.upstream.source_files` and `.transaction`: files read as Python reads source, written back byte for byte,
all or nothing."""

import os
import stat

import pytest

from tileblend.upstream import source_files, transaction
from tileblend.upstream.source_files import SourceError, SourceFile, read_source, split_lines, with_newline
from tileblend.upstream.transaction import write_files


def test_read_source_keeps_bom_and_line_endings(tmp_path):
    path = tmp_path / "module.py"
    path.write_bytes(b"\xef\xbb\xbfimport torch\r\n\r\nx = 1\n# \xc3\xa9\r\n")
    source = read_source(path)
    assert source.text == "import torch\r\n\r\nx = 1\n# \u00e9\r\n"
    assert (source.encoding, source.newline) == ("utf-8-sig", "\r\n")
    assert source.encoded() == path.read_bytes()
    assert split_lines(source.text) == ["import torch\r\n", "\r\n", "x = 1\n", "# \u00e9\r\n"]


def test_read_source_refuses_what_is_not_a_regular_file_at_once(tmp_path):
    """A tree can hold a FIFO named like a module (a read would block forever) or a link to a device (endless)."""
    os.mkfifo(tmp_path / "fifo.py")
    (tmp_path / "zero.py").symlink_to("/dev/zero")
    (tmp_path / "folder.py").mkdir()
    for name in ["fifo.py", "zero.py", "folder.py"]:
        with pytest.raises(SourceError, match=f"cannot read {tmp_path / name}: .* is not a regular file"):
            read_source(tmp_path / name)


def test_read_source_refuses_a_file_larger_than_any_module(tmp_path, monkeypatch):
    monkeypatch.setattr(source_files, "MAX_SOURCE_BYTES", 8)
    (tmp_path / "big.py").write_text("x = 123456\n")
    with pytest.raises(SourceError, match="is larger than 8 bytes"):
        read_source(tmp_path / "big.py")


def test_split_lines_splits_where_python_does():
    assert split_lines("a\x0cb\rc\r\nd\u2028e\n") == ["a\x0cb\r", "c\r\n", "d\u2028e\n"]
    assert with_newline("a\nb\n", "\r\n") == "a\r\nb\r\n"


def test_read_source_honours_the_coding_cookie_and_refuses_undecodable_files(tmp_path):
    latin = tmp_path / "latin.py"
    latin.write_bytes(b"# -*- coding: latin-1 -*-\nx = '\xe9'\n")
    assert read_source(latin).text.endswith("x = '\u00e9'\n")
    broken = tmp_path / "broken.py"
    broken.write_bytes(b"x = '\xe9'\n")
    with pytest.raises(SourceError, match=f"cannot read {broken}: invalid or missing encoding declaration"):
        read_source(broken)
    broken.write_bytes(b"x = 1\ny = 2\nz = '\xe9'\n")  # the tokenizer looks at two lines for a declaration
    with pytest.raises(SourceError, match=f"cannot read {broken}: 'utf-8' codec can't decode byte 0xe9"):
        read_source(broken)


def fail_on_call(monkeypatch, number: int):
    """Make the `number`-th call of os.replace on a module raise OSError (the others, and the journal's, replace)."""
    replace, calls = os.replace, []

    def failing(source, target):
        if not str(target).endswith(".py"):
            return replace(source, target)
        calls.append(target)
        if len(calls) == number:
            raise OSError(28, "No space left on device")
        replace(source, target)

    monkeypatch.setattr(os, "replace", failing)
    return calls


def three_files(tmp_path):
    paths = [tmp_path / name for name in ("a.py", "b.py", "c.py")]
    for path in paths:
        path.write_bytes(f"{path.stem} = 1\r\n".encode())
    return paths


@pytest.mark.parametrize("failing_call", [1, 3])
def test_a_failed_replacement_puts_back_the_files_replaced_before(tmp_path, monkeypatch, failing_call):
    paths = three_files(tmp_path)
    new = tmp_path / "new.py"
    before = {path: path.read_bytes() for path in paths}
    calls = fail_on_call(monkeypatch, failing_call)
    with pytest.raises(SourceError) as error:
        write_files([*(SourceFile(path, "changed\n") for path in paths[:2]), SourceFile(new, "x\n")], tree=tmp_path)
    message = str(error.value)
    failed = [paths[0], paths[1], new][failing_call - 1]
    assert message.startswith(f"cannot write {failed}: [Errno 28] No space left on device; nothing was written")
    assert f"(files replaced before it, put back: {failing_call - 1})" in message
    assert {path: path.read_bytes() for path in paths} == before
    assert not new.exists()
    assert sorted(os.listdir(tmp_path)) == ["a.py", "b.py", "c.py"]  # no temporary file or backup left
    assert len(calls) == 2 * failing_call - 1  # the replacements, then one put-back per file replaced


def test_a_failed_put_back_is_reported(tmp_path, monkeypatch):
    paths = three_files(tmp_path)
    replace, calls = os.replace, []

    def failing(source, target):
        if not str(target).endswith(".py"):
            return replace(source, target)
        calls.append(target)
        if len(calls) >= 3:  # the third replacement, then the put-back of the first two
            raise OSError(5, "Input/output error")
        replace(source, target)

    monkeypatch.setattr(os, "replace", failing)
    with pytest.raises(
        SourceError,
        match="left written: .*a.py \\(Input/output error; original kept in .*b.py \\(Input/output error; original kept in ",
    ):
        write_files([SourceFile(path, "changed\n") for path in paths], tree=tmp_path)
    assert paths[2].read_bytes() == b"c = 1\r\n"


def test_an_interrupt_during_the_replacements_puts_back_and_propagates(tmp_path, monkeypatch):
    paths = three_files(tmp_path)
    before = {path: path.read_bytes() for path in paths}
    replace, calls = os.replace, []

    def interrupted(source, target):
        if not str(target).endswith(".py"):
            return replace(source, target)
        calls.append(target)
        if len(calls) == 2:
            raise KeyboardInterrupt
        replace(source, target)

    monkeypatch.setattr(os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        write_files([SourceFile(path, "changed\n") for path in paths], tree=tmp_path)
    assert {path: path.read_bytes() for path in paths} == before
    assert sorted(os.listdir(tmp_path)) == ["a.py", "b.py", "c.py"]


def test_symlinks_mode_and_owner_are_kept(tmp_path):
    target = tmp_path / "real" / "module.py"
    target.parent.mkdir()
    target.write_bytes(b"x = 1\n")
    target.chmod(0o640)
    link = tmp_path / "module.py"
    link.symlink_to(target)
    owner = (4321, 4322) if os.getuid() == 0 else (os.getuid(), os.getgid())
    os.chown(target, *owner)

    write_files([SourceFile(link, "x = 2\n")], tree=tmp_path)
    assert link.is_symlink() and link.resolve() == target
    assert target.read_bytes() == b"x = 2\n"
    status = target.stat()
    assert stat.S_IMODE(status.st_mode) == 0o640
    assert (status.st_uid, status.st_gid) == owner


def test_read_only_file_refused_before_anything_is_written(tmp_path):
    paths = three_files(tmp_path)
    paths[2].chmod(0o444)
    with pytest.raises(SourceError, match=f"cannot write {paths[2]}: the file is read-only; nothing was written"):
        write_files([SourceFile(path, "changed\n") for path in paths], tree=tmp_path)
    assert [path.read_bytes() for path in paths] == [b"a = 1\r\n", b"b = 1\r\n", b"c = 1\r\n"]


def test_new_files_get_the_default_mode(tmp_path):
    path = tmp_path / "new.py"
    write_files([SourceFile(path, "x = 1\n", "utf-8-sig")], tree=tmp_path)
    assert path.read_bytes() == b"\xef\xbb\xbfx = 1\n"
    assert stat.S_IMODE(path.stat().st_mode) == transaction.NEW_FILE_MODE
