"""Kernel specs (docs/DESIGN.md §4.1) and the layout registry (§3.7): parsing, validation, the
built-in registry, parameters and the build-name hash. CPU only (the hash needs torch's version)."""

from __future__ import annotations

import re
import secrets
from pathlib import Path

import pytest

from workbench import cli
from workbench.core.errors import BadArgument
from workbench.data.layouts import LAYOUTS, READERS, decode_metadata, encode_metadata
from workbench.kernels.specs import BUILTIN_PARAMS, REPO, csrc_dir, load_spec
from workbench.kernels.variants import ARMS, Variant, all_variants, parse_arm
from workbench.measure.plan import parse_arm_spec, plan_ab

EXAMPLE = REPO / "examples" / "w13_unroll4" / "variant.toml"
CU = '#include "w13.cu"\n'


def write_spec(folder: Path, body: str = "", cu: str = CU, **over: str) -> Path:
    """A spec + .cu in ``folder`` (outside the package) that builds the project's W13 launcher."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "mine.cu").write_text(cu)
    fields = {
        "name": '"mine"', "kernel": '"w13"', "layout": '"b3"', "reader": '"scalar"',
        "sources": f'["mine.cu", "{csrc_dir() / "binding.cpp"}"]',
        "include_dirs": f'["{csrc_dir()}"]',
    }  # fmt: skip
    fields.update(over)
    text = "".join(f"{k} = {v}\n" for k, v in fields.items() if v is not None)
    text += body or "[promise]\ntolerance = 2e-3\n"
    p = folder / "variant.toml"
    p.write_text(text)
    return p


def test_the_example_spec_loads_with_its_parameter():
    s = load_spec(EXAMPLE)
    assert (s.name, s.kernel, s.layout, s.reader, s.tolerance) == (
        "w13-unroll4",
        "w13",
        "b3",
        "scalar",
        2e-3,
    )
    v = Variant.of_spec(s)
    assert "-DWB_W13_UNROLL=4" in v.defines() and "-DWB_LAYOUT_B3" in v.defines()
    assert v.name == "w13:w13-unroll4" and v.user
    hashes = s.source_hashes()
    assert "examples/w13_unroll4/w13_unroll4.cu" in hashes and "csrc/kernels/w13.cuh" in hashes
    assert all(re.fullmatch(r"[0-9a-f]{64}", h) for h in hashes.values())


@pytest.mark.parametrize(
    "over, body, field",
    [
        ({"kernel": '"w3"'}, None, "kernel"),
        ({"layout": '"b5"'}, None, "layout"),
        ({"reader": '"coop"', "layout": '"b4"'}, None, "reader"),
        ({"name": '"b3-scalar"'}, None, "name"),
        ({"name": '"has space"'}, None, "name"),
        ({"sources": '["missing.cu"]'}, None, "sources"),
        ({"sources": '["variant.toml"]'}, None, "sources"),
        ({"include_dirs": '["no/such/dir"]'}, None, "include_dirs"),
        ({"defines": '["WB_LAYOUT_B4"]'}, None, "defines"),
        ({"cuda_flags": '["-DX=1"]'}, None, "cuda_flags"),
        ({"colour": '"blue"'}, None, "colour"),
        ({}, "[promise]\ntolerance = 2\n", "promise.tolerance"),
        ({}, '[promise]\nidentical_to = "b9-scalar"\n', "promise.identical_to"),
        ({}, '[promise]\nidentical_to = "b3-scalar"\ntolerance = 1e-3\n', "promise"),
        ({}, "", "promise"),
        ({}, "[promise]\ntolerance = 1e-3\n[params.u]\nmacro = \"U\"\nvalues = [1, 2]\ndefault = 3\n",
         "params.u.default"),
        ({}, "[promise]\ntolerance = 1e-3\n[params.u]\nmacro = \"1U\"\nvalues = [1]\ndefault = 1\n",
         "params.u.macro"),
        ({}, "[promise]\ntolerance = 1e-3\n[params.u]\nmacro = \"U\"\nvalues = []\ndefault = 1\n",
         "params.u.values"),
    ],
)  # fmt: skip
def test_a_bad_field_is_one_line_naming_file_and_field(tmp_path, over, body, field):
    p = write_spec(tmp_path / "v", body=body if body is not None else "", **over)
    if body == "":
        p.write_text(p.read_text().replace("[promise]\ntolerance = 2e-3\n", ""))
    with pytest.raises(BadArgument) as e:
        load_spec(p)
    msg = str(e.value)
    assert "\n" not in msg and str(p.resolve()) in msg and f": {field}: " in msg, msg


def test_bad_toml_and_missing_file_are_bad_arguments(tmp_path):
    p = tmp_path / "v.toml"
    p.write_text("name = [unclosed\n")
    with pytest.raises(BadArgument, match="not valid TOML"):
        load_spec(p)
    with pytest.raises(BadArgument, match="does not exist"):
        load_spec(tmp_path / "nope.toml")


def test_paths_resolve_relative_to_the_toml_file(tmp_path, monkeypatch):
    p = write_spec(tmp_path / "deep" / "v")
    monkeypatch.chdir(tmp_path)  # elsewhere: the spec still finds its .cu next to it
    s = load_spec(p)
    assert s.sources[0] == (tmp_path / "deep" / "v" / "mine.cu").resolve()
    assert s.root == (tmp_path / "deep" / "v").resolve()


def test_the_six_builtins_are_specs_in_one_registry():
    vs = all_variants()
    assert [v.name for v in vs] == [f"{k}:{a}" for k in ("w13", "w2") for a in ARMS]
    for v in vs:
        s = v.kernel_spec
        assert s.builtin and s.name == v.arm and s.kernel == v.kernel
        assert [p.name for p in s.sources] == [f"{v.kernel}.cu", "binding.cpp"]
        assert {p.name for p in s.params} == set(BUILTIN_PARAMS[v.kernel])
    ids = {v.identity() for v in vs if v.kernel == "w13"}
    assert ids == {"w13:b3-scalar"}  # every built-in promises b3-scalar's bits


@pytest.mark.parametrize("kernel", ["w13", "w2"])
def test_builtin_param_defaults_match_the_cuda_headers(kernel):
    text = (csrc_dir() / "kernels" / f"{kernel}.cuh").read_text()
    for p in BUILTIN_PARAMS[kernel].values():
        m = re.search(rf"#ifndef {p['macro']}\s*\n#define {p['macro']} (\d+)", text)
        assert m, f"{p['macro']} is not overridable in {kernel}.cuh"
        assert int(m.group(1)) == p["default"], p["macro"]


def test_parameters_are_checked_named_and_normalised():
    base = parse_arm("w13", "b3-scalar")
    v = Variant("w13", "b3", "scalar", params=(("unroll", 4),))
    assert v.name == "w13:b3-scalar[unroll=4]" and "-DWB_W13_UNROLL=4" in v.defines()
    assert v.identity() != base.identity()  # other parameters: gated by tolerance
    assert Variant("w13", "b3", "scalar", params=(("unroll", 5),)) == base  # the default
    with pytest.raises(BadArgument, match="unroll=7"):
        Variant("w13", "b3", "scalar", params=(("unroll", 7),))
    with pytest.raises(BadArgument, match="no parameter 'tiles'"):
        Variant("w13", "b3", "scalar", params=(("tiles", 4),))


def test_build_name_hashes_tree_params_and_flags(tmp_path):
    pytest.importorskip("torch")
    from workbench.kernels.build import build_name

    a = Variant.of_spec(load_spec(write_spec(tmp_path / "a", cu=CU + "// a\n")))
    b = Variant.of_spec(
        load_spec(write_spec(tmp_path / "b", cu=CU + f"// {secrets.token_hex(4)}\n"))
    )
    same = Variant.of_spec(load_spec(write_spec(tmp_path / "c", cu=CU + "// a\n")))
    assert build_name(a, "9.0") != build_name(b, "9.0")  # other tree: other module name
    assert build_name(a, "9.0") == build_name(same, "9.0")  # a copy of a tree hashes the same
    assert build_name(a, "9.0") != build_name(a, "8.0")
    base = parse_arm("w2", "b3-scalar")
    tuned = Variant("w2", "b3", "scalar", params=(("unroll", 4),))
    assert build_name(base, "9.0") != build_name(tuned, "9.0")
    assert build_name(base, "9.0").startswith("wb_w2_b3_scalar_")
    # a header change reaches the user spec that includes the project's folder
    extra = tmp_path / "a" / "extra.cuh"
    before = build_name(a, "9.0")
    extra.write_text(f"// {secrets.token_hex(4)}\n")
    assert build_name(a, "9.0") != before


def test_arms_accept_spec_files_with_the_right_contract(tmp_path):
    p = write_spec(tmp_path / "v")
    arm = parse_arm_spec("w13", str(p), "--b")
    assert arm.name == "mine" and arm.variant("w13").user
    with pytest.raises(BadArgument, match="--b .*implements w13, not w2"):
        parse_arm_spec("w2", str(p), "--b")
    with pytest.raises(BadArgument, match="--a .*does not exist"):
        parse_arm_spec("w13", str(tmp_path / "none.toml"), "--a")
    cmps = plan_ab(("w13",), ("hot",), "b3-scalar", str(p))
    main = cmps[0]
    assert main.role == "main" and main.gated and not main.bit_identical
    ident = write_spec(
        tmp_path / "i", body='[promise]\nidentical_to = "b3-scalar"\n', name='"same"'
    )
    assert plan_ab(("w13",), ("hot",), "b3-coop", str(ident))[0].bit_identical


def test_cli_rejects_bad_specs_with_exit_2(tmp_path, capsys):
    bad = write_spec(tmp_path / "v", kernel='"w7"')
    assert cli.main(["build", str(bad)]) == 2
    assert ": kernel: " in capsys.readouterr().err
    assert cli.main(["build", str(tmp_path / "v" / "mine.cu")]) == 2
    assert "not a kernel spec file" in capsys.readouterr().err
    assert cli.main(["ab", "--kernel", "w2", "--b", str(EXAMPLE)]) == 2
    assert "implements w13, not w2" in capsys.readouterr().err


def test_user_specs_listing_reads_the_search_path(tmp_path, monkeypatch):
    from workbench.kernels.variants import user_specs

    good = write_spec(tmp_path / "good")
    write_spec(tmp_path / "bad", layout='"b9"')
    monkeypatch.setenv("WORKBENCH_SPECS", str(tmp_path))
    specs, errors = user_specs()
    assert [s.origin for s in specs] == [str(good.resolve())]
    assert len(errors) == 1 and ": layout: " in errors[0]
    monkeypatch.delenv("WORKBENCH_SPECS")
    assert any(v.name == "w13:w13-unroll4" for v in all_variants(user=True))


# ------------------------------------------------------------------------------ layout registry


def test_layout_registry_round_trips_every_layout():
    import torch

    g = torch.Generator().manual_seed(secrets.randbits(31))
    scales = (torch.rand(3, 4, 64, generator=g) + 0.01).to(torch.float16)
    zeros = torch.randint(0, 16, (3, 4, 64), generator=g, dtype=torch.uint8)
    biases = None
    for name, lay in LAYOUTS.items():
        assert set(lay.readers) <= set(READERS) and lay.define.startswith("WB_LAYOUT_")
        meta = encode_metadata(scales, zeros, name)
        assert meta.shape == (3, 4, 64 * lay.record_bytes)
        s, b = decode_metadata(meta, name, 64)
        assert torch.equal(s.view(torch.int16), scales.view(torch.int16))
        biases = b if biases is None else biases
        assert torch.equal(b.view(torch.int16), biases.view(torch.int16))  # same pair everywhere


def test_unknown_layouts_are_never_labelled_b4_or_b3():
    from coop_model import tile_offset

    from workbench.data.capacity import expert_footprint

    fp = expert_footprint(64, 64)
    assert fp.meta("b3") == 2 * 64 * 3 and fp.meta("b4") == 2 * 64 * 4
    for call in (lambda: fp.total("b5"), lambda: tile_offset(0, 0, 64, "b5")):
        with pytest.raises(BadArgument, match="'b5' is not one of b4, b3"):
            call()


def test_cuda_layout_name_comes_from_one_constant():
    hits = [
        p.relative_to(csrc_dir()).as_posix()
        for p in csrc_dir().rglob("*")
        if p.is_file() and re.search(r"kLayoutName\s*=", p.read_text())
    ]
    assert hits == ["kernels/layout.h"]
    binding = (csrc_dir() / "binding.cpp").read_text()
    assert "return wb::kLayoutName;" in binding and '"b3"' not in binding
