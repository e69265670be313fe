"""`workbench build`: bad arguments exit 2 before any compile; the listing carries the ptxas report."""

import json

import pytest

from workbench import cli


def test_bad_arguments_exit_2_before_building(capsys):
    assert cli.main(["build", "--kernel", "w3"]) == 2
    assert "--kernel" in capsys.readouterr().err
    assert cli.main(["build", "--log", "w13:b5-coop"]) == 2
    assert "--log 'w13:b5-coop' is not a variant" in capsys.readouterr().err
    assert cli.main(["build", "--jobs", "0"]) == 2


@pytest.mark.compile
def test_build_lists_every_variant_with_its_report(capsys):
    from cuda_toolchain import cuda_build_skip_reason

    if reason := cuda_build_skip_reason():
        pytest.skip(reason)
    assert cli.main(["build", "--kernel", "w2", "--no-calib", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["variant"] for r in rows] == ["w2:b4-scalar", "w2:b3-scalar", "w2:b3-coop"]
    for r in rows:
        assert r["registers"] > 0 and r["spill_stores"] == 0 and len(r["lib_sha256"]) == 64
        assert r["cache"] in ("hit", "built") and r["build_seconds"] > 0
