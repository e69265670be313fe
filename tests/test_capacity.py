"""Capacity arithmetic and `workbench capacity` (docs/DESIGN.md §2: 943,718,400 bytes saved per rank)."""

import json
import subprocess
import sys

import pytest

from workbench.cli import main
from workbench.core.errors import BadArgument
from workbench.data.capacity import capacity, expert_footprint
from workbench.data.shapes import PRESETS, Shape, resolve_shape

SEED_SAVING = 943_718_400  # docs/DESIGN.md §2, the default preset at tp 4


def test_default_preset_saving_is_900_mib():
    cap = capacity(resolve_shape("qwen3.8-flash-next", tp=4))
    assert cap.per_rank.saving == SEED_SAVING == 900 * (1 << 20)
    assert cap.per_rank.meta_b4 - cap.per_rank.meta_b3 == SEED_SAVING


def test_footprints_by_hand():
    # W13: 80 groups x 320 columns = 25,600 records; W2: 5 x 2560 = 12,800 records.
    cap = capacity(PRESETS["qwen3.8-flash-next"])
    w13, w2 = cap.per_kernel["w13"], cap.per_kernel["w2"]
    assert (w13.weights, w13.meta_b4, w13.meta_b3) == (2560 * 320 // 2, 25_600 * 4, 25_600 * 3)
    assert (w2.weights, w2.meta_b4, w2.meta_b3) == (160 * 2560 // 2, 12_800 * 4, 12_800 * 3)
    assert cap.per_expert.weights == w13.weights + w2.weights
    assert cap.per_layer.meta_b3 == 512 * (w13.meta_b3 + w2.meta_b3)
    assert cap.per_rank.weights == 48 * 512 * (w13.weights + w2.weights)


def test_saving_is_a_quarter_of_metadata_for_every_preset_and_tp():
    for name in PRESETS:
        for tp in (1, 2, 4):
            cap = capacity(resolve_shape(name, tp=tp))
            assert cap.per_rank.meta_b4 == 4 * cap.per_rank.saving, (name, tp)
            assert cap.per_rank.meta_b3 == 3 * cap.per_rank.saving, (name, tp)


def test_custom_shape_scales_linearly():
    small = capacity(Shape(256, 128, 8, 2, 3, tp=2))
    # W13 K=256 N=128 (8 groups), W2 K=64 N=256 (2 groups)
    assert small.per_expert.saving == 8 * 128 + 2 * 256
    assert small.per_rank.saving == 3 * 8 * (8 * 128 + 2 * 256)
    assert expert_footprint(64, 256).weights == 64 * 256 // 2


def test_kv_tokens():
    cap = capacity(PRESETS["qwen3.8-flash-next"], kv_bytes_per_token=4096)
    assert cap.kv_tokens == SEED_SAVING // 4096 == 230_400
    assert capacity(PRESETS["qwen3.8-flash-next"]).kv_tokens is None


@pytest.mark.parametrize("bad", [0, -5, 2.5, True])
def test_kv_bytes_must_be_positive_int(bad):
    with pytest.raises(BadArgument, match=r"kv_bytes_per_token="):
        capacity(PRESETS["qwen3.8-flash-next"], kv_bytes_per_token=bad)


def test_cli_json_reports_the_figure():
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "workbench",
            "capacity",
            "--preset",
            "qwen3.8-flash-next",
            "--tp",
            "4",
            "--json",
            "--kv-bytes-per-token",
            "1024",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    d = json.loads(out)
    assert d["saving_bytes_per_rank"] == SEED_SAVING
    assert d["saving_mib_per_rank"] == 900.0
    assert d["per_rank"]["saving"] == SEED_SAVING
    assert d["dims"] == {"w13": {"K": 2560, "N": 320}, "w2": {"K": 160, "N": 2560}}
    assert d["kv_tokens"] == SEED_SAVING // 1024
    assert d["shape"]["name"] == "qwen3.8-flash-next"


def test_cli_human_output(capsys):
    assert main(["capacity", "--preset", "qwen3-next-80b-a3b", "--tp", "8"]) == 0
    out = capsys.readouterr().out
    # W13 K=2048 N=128 (64 groups), W2 K=64 N=2048 (2 groups): 12,288 records per expert
    saving = 12_288 * 512 * 48
    assert f"{saving:,}" in out
    assert "qwen3-next-80b-a3b" in out


def test_cli_bad_shape_exits_2_and_names_value(capsys):
    assert main(["capacity", "--tp", "8"]) == 2
    err = capsys.readouterr().err
    assert "=80" in err and "tp=8" in err
    assert main(["capacity", "--preset", "nope"]) == 2
    assert "preset='nope'" in capsys.readouterr().err
