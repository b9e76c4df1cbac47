"""The texts `tileblend rewrite` has written as `AutoencoderMixin.blend_v/h/t`: the mixin methods it may refresh.

A mixin method in a tree's vae.py is tileblend's, and may be refreshed, only while its whole text (decorators to last
line, line endings aside) is one that tileblend wrote: the one it is writing, the one generated now from
`tileblend.blend` (`tileblend.upstream.blend_methods`), or an earlier one, listed in `EARLIER` by the SHA-256 of its
text. Anything else, an edited body under tileblend's own docstring included, is someone's work: the rewrite stops
rather than overwrite it.

`EARLIER` holds every form generated from a committed `src/tileblend/blend.py` since `FIRST_COMMIT`, where the
methods became self-contained (`git show COMMIT:src/tileblend/blend.py` through `blend_methods.upstream_code` gives
each text back; `tests/test_rewrite_code.py` checks the list against the history). A change of the text in
`tileblend/blend.py` adds the digests of the form it replaces.
"""

import hashlib

from .blend_methods import UpstreamCode, upstream_code


FIRST_COMMIT = "2cad49badf28bfba20acbfdaefe87023035b205a"
EARLIER = frozenset(
    {
        # blend_v, blend_h, blend_t from blend.py at 2cad49b
        "58f40cd4bd79cd45b6d54fcdf2a05a1a889fa9f3f67f5842dda96ea7fae08104",
        "341b8c4320b4b1ec64502f09fcaa2e440896708511e93812240ce5f40ed28565",
        "d65f0e67eed5a8c96042f5e35d42b1f289b0ad93b08978b57763f8cf6d156025",
        # a16d1bc
        "543ade4772cc206ba5d114f46098a2a17f0ee8cac189af492b1a7f53ff2f4b34",
        "11093789e79ed6c415373d2983d7c4b729dc5c471e83af22a6d25bd8f8f3f6bd",
        "b4cad5226bcff943b4ac54b7361a114c0451ba48ead9ec0cbbd930cbc8964b1f",
        # 39b151d
        "710c31ae15c49aa74eb24292c8767c4348e3dff71a306d4809e02ab91e5e97d0",
        "4b463b139d4eadd28f7dc94dad3d0f38aafa124031b64bc4cff8711269ab0abf",
        "387633ce0bdbc0bbf83718a3acf08f38e9b76d27ae99c48008308cf94458bc1f",
        # eaf6cdb
        "cfce01913f21afe26fd614cfb5182303edf38475f4ae67b71f68637f8329e8f1",
        "a0bc117c91b81199e1db9bfbf277d447d34729b8d15509d1bd84dc6e8717d9e6",
        "afbb75ce833293ac3c64c35fbdb321b339ecab5fc866ff28271668929345e4c8",
        # 7f2a53e
        "3b1bae7f4c444639e94fcb5cd02330bc06f47358e01adda531db6ad0a239b3de",
        "c56ee7152adb4b0c7c4c61c203cb4884b7a83271efefa3d883a0952264b7b4cb",
        "cb5af40df42f89a5ba37630160f49b457a27d36cfed3a4d09794a5692afacc40",
        # d5250ba
        "56dad0942b2a1e6dc0b6f57afcbfa8ffd24301898118c092560b88b8702d0a9d",
        "647efc696e2a44f9ebe84a925954c25d9c9ec487a50f0b07f0d0e082c32af17d",
        "8b18e1e498eeda2aa12f04dbfda7a7bd78ada4da081855064f966b05468b1b8c",
        # d0d5ce7
        "351f04d0c568a354709c829056764853eb0651e0455159c751e61160e6345ad7",
        "42c34bec5b8494024eb239a6d023207f264b2f258f3f0d066a08ff503356e330",
        "722f8090aa17a6944270d8f9455c8f289c584674f8b54fa07576e796ac8b15c2",
        # 8e3cb2c
        "7985c7462e7d2a2f6c82176e162deef688d9b87bf23afac897aa6ab6f94c2d62",
        "4b4c17df7ff0a0885d56ac34bef4065328da08cec495dce996bf6810efc76a3e",
        "5135ec11933ead2512fe1b67145936e04fcc48876912b75497a9bc792dc13019",
        # fc03e03
        "56b0e144009f961fe0d8bd7f4d988d2d653743f48ce217b468b9af5bc3c54e8d",
        "c7e9e178adae05a433dab806c3b658639d79bad38efc5eb2042d3eaa5945ccf8",
        "399db8acf967e873a01f104d8186c1f733488a051a2cc8817c32cd22044e2f30",
    }
)


def digest(text: str) -> str:
    """The SHA-256 of a method text (line endings "\\n"), as `EARLIER` lists it."""
    return hashlib.sha256(text.encode()).hexdigest()


def written(name: str, text: str, code: UpstreamCode) -> bool:
    """Whether `text` (line endings "\\n") is a text tileblend wrote as the mixin method `name`: `code`'s, the one
    generated now, or an earlier one."""
    return text in (code.methods[name], upstream_code().methods[name]) or digest(text) in EARLIER
