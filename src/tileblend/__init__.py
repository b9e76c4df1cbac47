"""tileblend: exact, vectorized tiled-VAE blending for Hugging Face diffusers."""

from .blend import blend_h, blend_t, blend_v
from .patch import PatchedMethod, disable, enable, enabled, is_enabled
from .streamed import streamed_decode


__version__ = "0.1.0"

__all__ = [
    "PatchedMethod",
    "blend_h",
    "blend_t",
    "blend_v",
    "disable",
    "enable",
    "enabled",
    "is_enabled",
    "streamed_decode",
]
