"""Shapes and presets (docs/DESIGN.md §2): per-rank dimensions, overrides, and errors that name the value."""

import argparse

import pytest

from workbench.core.errors import BadArgument
from workbench.data.shapes import (
    DEFAULT_PRESET,
    PRESETS,
    Shape,
    add_shape_arguments,
    resolve_shape,
    shape_from_args,
    valid_tps,
)


def test_default_preset_dims_match_design():
    s = resolve_shape()
    assert s.name == DEFAULT_PRESET == "qwen3.8-flash-next"
    assert s.tp == 4
    assert s.dims("w13") == (2560, 320)
    assert s.dims("w2") == (160, 2560)
    assert (s.w13_k, s.w13_n, s.w2_k, s.w2_n) == (2560, 320, 160, 2560)


@pytest.mark.parametrize(
    "name,h,i,e,k,layers",
    [
        ("qwen3.8-flash-next", 2560, 640, 512, 10, 48),
        ("qwen3-next-80b-a3b", 2048, 512, 512, 10, 48),
        ("qwen3.5-397b-a17b", 4096, 1024, 512, 10, 60),
    ],
)
def test_presets_hold_the_design_table(name, h, i, e, k, layers):
    s = PRESETS[name]
    assert (s.hidden, s.inter, s.experts, s.top_k, s.layers, s.tp, s.group) == (
        h,
        i,
        e,
        k,
        layers,
        4,
        32,
    )
    s.validate()


def test_valid_tps():
    # 640/8 = 80 columns per half is not a multiple of 32; 512/8 = 64 and 1024/8 = 128 are.
    assert valid_tps("qwen3.8-flash-next") == [1, 2, 4]
    assert valid_tps("qwen3-next-80b-a3b") == [1, 2, 4, 8]
    assert valid_tps("qwen3.5-397b-a17b") == [1, 2, 4, 8]


def test_explicit_fields_override_the_preset():
    s = resolve_shape("qwen3-next-80b-a3b", tp=2, layers=3, experts=16, top_k=4)
    assert (s.hidden, s.inter, s.experts, s.top_k, s.layers, s.tp) == (2048, 512, 16, 4, 3, 2)
    assert s.name == "qwen3-next-80b-a3b+custom"
    assert s.dims("w13") == (2048, 512)
    assert s.dims("w2") == (256, 2048)
    # tp alone keeps the preset's name
    assert resolve_shape("qwen3-next-80b-a3b", tp=8).name == "qwen3-next-80b-a3b"


def test_cli_helpers_round_trip():
    p = argparse.ArgumentParser()
    add_shape_arguments(p)
    args = p.parse_args(["--preset", "qwen3.5-397b-a17b", "--tp", "8", "--top-k", "6"])
    s = shape_from_args(args)
    assert (s.hidden, s.inter, s.tp, s.top_k) == (4096, 1024, 8, 6)
    assert shape_from_args(p.parse_args([])) == PRESETS[DEFAULT_PRESET]


def test_unknown_preset_lists_known_ones():
    with pytest.raises(BadArgument) as e:
        resolve_shape("llama-moe")
    msg = str(e.value)
    assert "preset='llama-moe'" in msg
    for name in PRESETS:
        assert name in msg


@pytest.mark.parametrize(
    "kwargs,needles",
    [
        (dict(hidden=2560 + 16), ["W13 K", "2576"]),
        (dict(inter=642), ["inter=642", "tp=4"]),
        (dict(inter=640 + 4 * 16), ["W13 N/2", "176"]),
        (dict(inter=640 + 4 * 8), ["W13 N", "336"]),
        (dict(tp=8), ["W13 N/2", "80"]),
        (dict(tp=3), ["inter=640", "tp=3"]),
        (dict(top_k=600), ["top_k=600", "experts=512"]),
        (dict(experts=0), ["experts=0"]),
        (dict(layers=-1), ["layers=-1"]),
        (dict(tp=0), ["tp=0"]),
        (dict(hidden=2560.0), ["hidden=2560.0"]),
    ],
)
def test_shape_errors_name_dimension_and_value(kwargs, needles):
    with pytest.raises(BadArgument) as e:
        resolve_shape("qwen3.8-flash-next", **kwargs)
    for needle in needles:
        assert needle in str(e.value), f"{needle!r} not in {str(e.value)!r}"


def test_group_other_than_32_is_rejected():
    with pytest.raises(BadArgument, match=r"group=64"):
        Shape(2560, 640, 512, 10, 48, group=64).validate()


def test_dims_rejects_unknown_kernel():
    with pytest.raises(BadArgument, match=r"kernel='w3'"):
        PRESETS[DEFAULT_PRESET].dims("w3")


def test_shape_is_frozen():
    s = PRESETS[DEFAULT_PRESET]
    with pytest.raises(AttributeError):
        s.hidden = 1  # type: ignore[misc]
