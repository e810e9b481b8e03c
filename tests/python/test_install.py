"""The installed package finds its own templates, never the source tree it was built from."""

import pathlib


def test_templates_come_from_the_package(gbx):
    pkg = pathlib.Path(gbx.__file__).resolve().parent
    assert gbx.TEMPLATE_DIR == pkg / "templates"
    assert (gbx.TEMPLATE_DIR / "manifest.json").is_file()
    assert pathlib.Path(gbx._native.template_root()) == gbx.TEMPLATE_DIR
    # Imported from site-packages, not from the checkout's python/ directory.
    assert "site-packages" in str(pkg) or "dist-packages" in str(pkg)


def test_native_abi_matches_templates(gbx):
    text = (gbx.TEMPLATE_DIR / "abi" / "gbx_abi.h").read_text()
    assert f"#define GBX_ABI_VERSION {gbx._native.ABI_VERSION}" in text
