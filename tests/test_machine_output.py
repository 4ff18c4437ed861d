"""Issue 10 point 3: --json summaries, output that suits CI logs, per-rank reports that summarise."""

from __future__ import annotations

import json

from click.testing import CliRunner

from distc.cli import main

from conftest import DATA

SAMPLE = DATA / "corpus/paddle-3.3.1/stage1/mlp_dp2mp2_adamw.s0.r0.before_partition.ir"


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def last_json(stderr: str) -> dict:
    return json.loads(stderr.strip().splitlines()[-1])


def test_shard_json_one_rank():
    r = run("shard", SAMPLE, "--rank", "1", "--json")
    assert r.exit_code == 0, r.stderr
    doc = last_json(r.stderr)
    assert doc["command"] == "shard" and doc["stage"] == 1 and doc["sharding_axis"] == 0
    one = doc["ranks"]["1"]
    assert one["collectives"] == sum(g["count"] for g in one["by_group"]) > 0
    assert one["bytes_sent"] == sum(g["bytes_sent"] for g in one["by_group"])
    assert one["memory"]["before"]["optimizer_states"] > one["memory"]["after"]["optimizer_states"]
    assert one["saved"] == one["memory"]["before"]["total"] - one["memory"]["after"]["total"] > 0
    assert any("sharding mesh dim 0" in d for d in doc["decisions"])
    assert "│" not in r.stderr  # JSON instead of the tables


def test_shard_json_all_ranks(tmp_path):
    r = run("shard", SAMPLE, "--all-ranks", "-o", tmp_path / "m.r{rank}.ir", "--json", "-j", "1")
    assert r.exit_code == 0, r.stderr
    doc = last_json(r.stderr)
    assert sorted(doc["ranks"]) == ["0", "1", "2", "3"]
    assert all(x["bytes_sent"] > 0 and x["saved"] > 0 for x in doc["ranks"].values())


def test_reshard_json():
    r = run("reshard", "--from", "p", "--to", "s1", "--all-ranks", "--json", "--explain")
    assert r.exit_code == 0
    doc = last_json(r.stderr)
    assert doc["command"] == "reshard" and sorted(doc["ranks"]) == ["0", "1"]
    (c,) = doc["ranks"]["0"]["collectives"]
    assert c["op"] == "reduce_scatter" and c["group"] == [0, 1] and c["bytes_sent"] == 64
    (d,) = doc["ranks"]["0"]["decisions"]
    assert d["function"] == "p_to_s" and d["origin"] == "paddle" and "reduce_scatter" in d["inserted"]
    assert doc["ranks"]["1"]["ring_ids"] == {"12": [0, 1]}


def test_opt_json():
    r = run("opt", SAMPLE, "-p", "shard-optimizer,partition,reshard{rank=0}", "--json")
    assert r.exit_code == 0, r.stderr
    doc = last_json(r.stderr)
    assert [p["pass"] for p in doc["passes"] if not p["pass"].startswith("(")] == \
        ["shard-optimizer", "partition", "reshard"]
    assert doc["bytes_sent"] == sum(c["moved"] for c in doc["collectives"]) > 0
    assert doc["decisions"]


def test_tables_do_not_wrap_off_a_terminal():
    r = run("reshard", "--from", "s0", "--to", "r", "--mesh-ids", "0,1", "--to-mesh-ids", "2,3",
            "--all-ranks", "--shape", "1000x1000")
    assert r.exit_code == 0
    rows = [ln for ln in r.stderr.splitlines() if ln[:1] in "┏┃┡│└"]
    assert len(rows) == 4 + 8  # 3 rules, the header, one row per collective: nothing wrapped
    assert len({len(ln) for ln in rows}) == 1 and len(rows[0]) > 80


def test_many_ranks_summarise():
    r = run("reshard", "--from", "s0,s1", "--to", "r,r", "--mesh", "4,8", "--shape", "32x64", "--all-ranks",
            "--explain")
    assert r.exit_code == 0
    err = r.stderr.splitlines()
    assert len(err) <= 14, r.stderr
    assert err[0].startswith("ranks 0-31: line 4: ")
    assert "ring ids: 4 different tables over 32 ranks" in r.stderr
    assert "8 groups of 4" in r.stderr and "4 groups of 8" in r.stderr
    assert "bytes sent per rank: 7.8 KiB on every rank" in r.stderr


def test_shard_all_ranks_explain_groups_ranks(tmp_path):
    # (was an internal error: the workers' summaries are dicts)
    r = run("shard", SAMPLE, "--all-ranks", "-o", tmp_path / "m.r{rank}.ir", "--explain", "-q", "-j", "1",
            "--dense")
    assert r.exit_code == 0, r.stderr
    err = r.stderr.splitlines()
    assert err[0] == "ranks 0-3: pipeline: shard-optimizer, partition, reshard, remove-other-rank, dist-to-dense"
    assert "  dist-to-dense: this rank: 101 op(s) lowered" in err
    assert err.count("every rank:") == 1 and not any(ln.startswith("rank ") for ln in err)
