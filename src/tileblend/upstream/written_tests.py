"""The test texts `tileblend rewrite` has written into a checkout's tests: the ones a rerun may refresh.

They are the reference row loop `blend_row_loop` and the tester mixin in `testing_utils.py`, the
`Test<Model>TilingBlend` classes (written under the config class `<Model>TesterConfig`, as upstream names them), and
the standalone test module of older checkouts (its template: the text with its rows of methods taken out). A
definition (or that module) is tileblend's, and refreshed, only while its whole text (line endings aside) is the one
generated now or one listed in `EARLIER` by the SHA-256 of its text (`written_methods.digest`); anything else, an edit
of ours included, stops the rewrite.

`EARLIER` holds every form generated at the commits since `FIRST_COMMIT` (where the generator became
`tileblend.upstream.test_text`, `.test_cases` and `.standalone_test`) that changed one of those modules;
`tests/test_written_tests.py` generates them again from the history and checks the list. A change of a generated test
text adds the digests of the forms it replaces.
"""

from .written_methods import digest


FIRST_COMMIT = "e1f91aab8c772c4a48de350e70f2e4cc0e941a98"
EARLIER = frozenset(
    {
        # e1f91aa: blend_row_loop, mixin, standalone, AutoencoderDC, AutoencoderKL, AutoencoderKLKVAE,
        # ConsistencyDecoderVAE, AutoencoderKLHunyuanVideo, AutoencoderKLLTXVideo, AutoencoderKLMochi,
        # AutoencoderKLWan, AutoencoderKLCogVideoX, AutoencoderKLLTX2Video, AutoencoderKLMagvit, AutoencoderVidTok,
        # LTX2VideoDiffusionDecoderModel
        "427d960e339297872472b88fb9d6e57df9ee424cd63e42377976c9744596817e",
        "8cd1388da5efff3053e70ea0cd6cff4bdfd54af1f5b0473c79b792b928499a92",
        "98589af06c44d6e408b9134088803227f7b92b3b0d2b00c4a8bff8ab26e5ee5b",
        "0f5ca5f8b7ddf77b8082c8b70af5a60ff154fe054bdac00f5bcbde040063bb8f",
        "0256af47b0a4d0d43be5a647e6051b79f29ab2f06be6858e75c0ea02c1478dca",
        "6220149e19724278c6878ea91b67d27930f3d8d379d51b8b482bb5eb0d4bdab5",
        "42658d8565fdd5024007ec295bcca76a93110cc80b7150834c445a62ff9e792a",
        "034f1328a4e90e0a98bcacb8d060691f666039acd0949a9e938e0a81285c069a",
        "d6aca0afbdc304ecd8fece9de745be0dc38483df109fa106ca3c978e2d699d74",
        "8bf0055eeb1da0c1550b3c964849173cc6c872a6e9c90c6796da6f6e34db1c5b",
        "e143e192d13a99816166c81c443d3737a1fb008e356677cd1d30925d2398d273",
        "f9476b9c5c0f5e84db70a838ba31629d46e9012b79d1121294fa87fab268681b",
        "55f8ce819279d4c736c83d32fadfb4033cc27c41c8e3914bd3738a6c739a4b05",
        "86dfbeae84d64053aea2d167d45c51e47ec5a768714144ae55db619acf741df9",
        "e58196332e5ec7c5180d882d00ff004b0b0e4a088a8129d0bbd3038d00bd3062",
        "cc8e040ed214f1099bcdc33bcdea20f5b1d6820c1cd5c332fd29477edb7ee1dc",
        # 39b151d: mixin, AutoencoderKL, ConsistencyDecoderVAE, AutoencoderKLHunyuanVideo, AutoencoderKLLTXVideo,
        # AutoencoderKLLTX2Video, AutoencoderVidTok, LTX2VideoDiffusionDecoderModel
        "949c3bfc73071120ef503222261f7f97e6f342ccb13df7187b6ac4e25ac9cb80",
        "5ca7c7e6980a9f720e6a804f8f104b2b25dc95be50b5d9bdaf69b80aa271292b",
        "18e08452b8c91285e0efb9232a7af8fabfe0d19c01fea38b00ba495f64ba295d",
        "ad28f8ac6fffb319e2af1654a36128bf454fe8b2201486c31ed428dd1a918b53",
        "015bfc5f002c50e9a34ede2b04437b84f13a89510aba2580751df49028bc1a73",
        "b858fe4c6e8dc6827e5fe953fc086f41d84e5f920c553b4750192f4df960c339",
        "3184a17e838f6f67a3e7c36fb33a210278587d425b976c68fa5790a87bfe8d2d",
        "a1c4b72ac01b19ea7285e729bf53845e98ce19281377a38deae55faa026c5c9d",
        # c254fb9: AutoencoderVidTok
        "2fc037b038c41025318ed997c25e7a500de642a5f4ff4748a79415ff71726674",
        # 779d2e0: AutoencoderVidTok
        "e04409702e4968948fcfdb57b8f2776fdd4e67cfd0aef0e17c8d5054a86750bc",
        # 88992fa: mixin, AutoencoderDC, AutoencoderKL, AutoencoderKLKVAE, ConsistencyDecoderVAE,
        # AutoencoderKLHunyuanVideo, AutoencoderKLLTXVideo, AutoencoderKLMochi, AutoencoderKLWan,
        # AutoencoderKLCogVideoX, AutoencoderKLLTX2Video, AutoencoderKLMagvit, AutoencoderVidTok,
        # LTX2VideoDiffusionDecoderModel
        "06d2b874c2e48eff244ba735b8e9c5a88a3e0ef90695c90ca9e43575a9c07647",
        "71cb7a24cb2d3bef58919f41846dc75d0205f14375b4a9d40ff0eef746620308",
        "6ea66365827e588f23da251460a25f3d481b66f2fda5e8bc5198207ef3371a73",
        "0c9a86e2e63ec9ffa7e774b94d48da723f4cb19ad55314c819cd8a85397d0c89",
        "bba1c474b0c786704082ac83bfc52a1b1b1228a55dd4576ee2065291c0235ade",
        "e6c0c8d9ab7b7f4aebe36105e7fd6a71f7f508d99343a1fcbb16db30cadf913e",
        "5064816437456c334db97616d7171d26179f0c2f245465e0fe8efa9866d83c88",
        "3fc300bdc62129483c95762e55b90081bf1e6d15b61a6a9b319cda8b9b96d7d9",
        "543297e5cc900ccb9a00b105b83c7eaf540afc6317a6dc4a41e2e05f874055f2",
        "22b376e7d2db5b5f4206fa466f70a23994f4fb9e2c1aaa8a4d80b5f17512f932",
        "c5ae77d617409cd439ba2bb407bd2ffef4e20529de6f3582ad8b68b052c3e07c",
        "fd160e580d4eb0cb24d3e20a16cd1d1bd13f197fffc3e8237f0236a795377dcd",
        "bf3ce9ab004560a28dd007f9f02b0c6124f1e3814267f6aa7d369204ad30649b",
        "3f25278c7ad28ac35da39c6a72b575d0d32dd6b27574ee816170c17206e27598",
        # eaf6cdb: AutoencoderKLLTX2Video
        "c77979821d03126bc71beac076d209c8d4787039e1ca0d2f7d03db0c26dbf7d5",
        # ada2135: mixin, AutoencoderDC, AutoencoderKL, AutoencoderKLKVAE, ConsistencyDecoderVAE,
        # AutoencoderKLHunyuanVideo, AutoencoderKLLTXVideo, AutoencoderKLMochi, AutoencoderKLWan,
        # AutoencoderKLCogVideoX, AutoencoderKLLTX2Video, AutoencoderKLMagvit, AutoencoderVidTok,
        # LTX2VideoDiffusionDecoderModel
        "6f8f98f83d8e3107be7ceb0a22a2b41553a678278bfdd0e1e2b3c9ade40f883e",
        "588bb836c67280b626e0cfa55e21deccc3761a0e246551bd4bd5f1af7f21936d",
        "3b90b6ad7a2c15c723d1a095c595b49f78f603a7d8bf2a096c75b2e78ee73345",
        "286a394b2f881bcf0f2d70f715b37ca85dfa4a8176fb44f394086435bbcc00f0",
        "4f54375e7c4e7c9182c9b86107f2dcc49107fc4aa24a1a20239a08f772b4b1c3",
        "09e487d8fc863f843f261c7c2aef787eb50b9944e7876bf53f0200d3b3cf9e6b",
        "ca7e8b0592258a6d0b53165d36aaaf92db19b992e7b42390017ddf2042ea54e6",
        "cef0464d79623945276e8510d2c5f474414a8ddabd2e05c080d3c33501a9fb32",
        "946934227c82521c853059503624283d9b43c8c2f2857abfd156cb0ca6c755f7",
        "bddea2e058e9f90f5567db1490ac8f41c93f59a6fb442336c06caa760686f902",
        "74cde2aa459184dbe16402170a92c54de369f2f382aa41a984998a6ffae034e9",
        "0db67c45ec33f34311ea21eecf57d1a44e3feae0897230542169a1bdea0432fa",
        "5072ea0df02a40ff94e146a254d661af852c9af6aacfba47409e125343d32071",
        "115af0ff3b80c453a7d4e7f85fd04634318e45862aa1c6a77e32c748c4839c7e",
        # b54a0b6: mixin, AutoencoderKL, AutoencoderKLLTX2Video
        "c874520de4c80ccf3f9f6879741ec585efbe9c4cd5772d70b561c492f8f73c1d",
        "67773952bb79d0a8fc5a290346c0279116e69f057df1770d46df9239c0d7ed88",
        "fdedb4cbc1b7b0a04fef3f0e709c3665a1c3647ecb19cefcf813111819e10a53",
        # 7f2a53e: mixin
        "af58da9cc35ec7b45ed71cfc2d62676e801a1c0873e50e0a4b244722222866e7",
        # 8f9e42f: blend_row_loop, mixin, arithmetic
        "f869a99d5b1214155f4b40124f851cdbbb6b6af0e711121749c09cdad649e010",
        "4bbea43c17a0b1227d6f5d4b79cc630247aa19f2ac32f6ba67d9c693bc96d60a",
        "f6a33b33095c6aa67df643eb051cc131ce784f3fdf84acf57c4e799f993a72f5",
        # 40539bd: arithmetic
        "29ab5783133e1c7d47e694583023e19df0c7cd678bd107e3a170b83520d0c65e",
        # f4d017f: mixin, arithmetic, AutoencoderDC, AutoencoderKL, AutoencoderKLKVAE, ConsistencyDecoderVAE,
        # AutoencoderKLHunyuanVideo, AutoencoderKLLTXVideo, AutoencoderKLMochi, AutoencoderKLWan, AutoencoderKLCogVideoX,
        # AutoencoderKLLTX2Video, AutoencoderKLMagvit
        "8e0bdf27064436003e4b6e8097ad3939836d0e7a23012b9d92d8eb85b85ceeea",
        "97a6f5057a74c2ecbcf3b2b7d74a3f48ee4b96f7e1f09263b2da5f59115f29a7",
        "a0061e01e9a1b2f52f5873c05584170c0cd4d67ee4ff90aff99ba553b1d800ca",
        "c9dd0d29db1f23f47135ae048f95f165927a732d5750481b1629a90c8919c1fd",
        "673cf041d96c2d87a7457055b638bb1ff3dad48623087b00983c71a245a0797f",
        "a459fdc594894165733b6b36d9e87ea6b9d393b1050a8acd6d34fb143d3b9d15",
        "b363f3b464d8563e4b2c984d2981aa60710fcfa03cb63b123ba685df77418504",
        "70ce2c3e962343db6d635243827b2e0b9f3e5c1573995a64407670b77339436e",
        "4d9b0c334ee92ce7d3a2c72c5c702411acc0d5a4d6ad7ec5f1fbf9cad5a6d49f",
        "443d713318775be2d95265a7faccd41298942e1272371fbd3d0be576b07f16bc",
        "a845b3495f89bd6594ab740dcf048c0c457c1a63f81e423e025e1f47e2d74443",
        "c0a444c6db8597529627605b2e0ac98bae1f8628b69505f994943a0b96c91c88",
        "214620be025c6d3a45fc88e623014b3b9003a355b87efe27cf042ed610d38610",
        # c83ef3b: mixin, arithmetic
        "c62254ec4b1ae7055773f052e9c5f4af65e6adbcc504a96e792d840da62193f9",
        "794ac36621f8d20ea4f4ae434bf40a9e636807c383e54079d5ccf15f2b18d6d2",
    }
)


def written(text: str) -> bool:
    """Whether `text` (line endings "\\n") is an earlier test text tileblend wrote."""
    return digest(text) in EARLIER
