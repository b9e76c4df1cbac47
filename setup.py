"""Packaging for tileblend. Runtime dependencies are torch and diffusers only; dev and CI pins live in constraints.txt."""

from setuptools import find_packages, setup


extras = {
    "dev": ["ruff>=0.9", "pytest>=8", "pytest-xdist>=3", "hypothesis>=6", "accelerate>=1.0", "tqdm>=4"],
    "bench": ["matplotlib>=3.7", "transformers>=4.41"],
    # What upstream diffusers main and its autoencoder tests import beyond the pinned wheel (make upstream-check).
    "upstream": ["httpx<1.0.0", "parameterized"],
}
extras["dev"] += extras["bench"] + extras["upstream"]

setup(
    name="tileblend",
    version="0.1.0",
    description="Exact, vectorized tiled-VAE blending for Hugging Face diffusers",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    license="Apache-2.0",
    package_dir={"": "src"},
    packages=find_packages("src"),
    package_data={"tileblend.upstream": ["drafts/*.md", "scripts/*.py"]},
    python_requires=">=3.10",
    install_requires=["torch>=2.4", "diffusers>=0.36", "tqdm>=4"],
    extras_require=extras,
    entry_points={"console_scripts": ["tileblend=tileblend.cli:main"]},
    classifiers=[
        "Programming Language :: Python :: 3",
        "Topic :: Scientific/Engineering :: Artificial Intelligence",
    ],
)
