"""Build the optional C kernel; everything else is configured in pyproject.toml."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "oakemu_rl._native.screen_kernel",
            sources=["src/oakemu_rl/_native/screen_kernel.c"],
            extra_compile_args=["-O3"],
            optional=True,  # without a C compiler the numpy path is used
        )
    ]
)
