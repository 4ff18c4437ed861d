"""``distc verify CAP`` and ``distc diff CAP``: a ``distc capture`` folder in place of a program, as
``distc shard CAP`` and ``distc report CAP`` take one (the stand-in Paddle of test_capture.py)."""

from __future__ import annotations

import json

from test_capture import STAGE1, distc, fake  # noqa: F401  (fake: the fixture)


def captured(tmp_path, fake, *opts, env=None):  # noqa: F811
    py, script, _ = fake
    r = distc("capture", "-o", "cap", "--world-size", "4", *opts, "--", py, script, cwd=tmp_path, env=env)
    assert r.returncode == 0, r.stderr
    (tmp_path / "out").mkdir()
    return r


def test_verify_cap_proves_paddles_own_programs(fake, tmp_path):  # noqa: F811
    captured(tmp_path, fake)
    r = distc("verify", "cap", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.startswith("main: EQUAL: 92 values"), r.stdout
    assert "note: verified Paddle's own programs of the script's stage 1: cap/s1.r{rank}.after_reshard.ir " \
           "against cap/s1.r0.before_partition.ir, startup cap/s1.r{rank}.startup_final.ir against " \
           "cap/s1.r{rank}.startup_after_remove.ir" in r.stdout, r.stdout
    # every rank's own serial startup program: a proof each
    for k in range(4):
        assert f"startup (cap/s1.r{k}.startup_after_remove.ir, ranks [{k}]): EQUAL: 21 values (1129 numbers)" \
            in r.stdout, r.stdout
    doc = json.loads(distc("verify", "cap", "--json", cwd=tmp_path).stdout)
    assert doc["status"] == "equal" and set(doc) >= {"main", "startup (cap/s1.r0.startup_after_remove.ir, ranks [0])"}


def test_verify_cap_with_ranks_proves_distcs_programs(fake, tmp_path):  # noqa: F811
    """The capture's next steps: shard the folder, then verify the outputs against the folder."""
    r = captured(tmp_path, fake)
    assert "distc verify cap --ranks 'out/main.r{rank}.ir' --startup-ranks 'out/startup.r{rank}.ir'" in r.stderr
    assert distc("shard", "cap", "-q", "-o", "out/main.r{rank}.ir", "--startup-out", "out/startup.r{rank}.ir",
                 cwd=tmp_path).returncode == 0
    r = distc("verify", "cap", "--ranks", "out/main.r{rank}.ir", "--startup-ranks", "out/startup.r{rank}.ir",
              cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.startswith("main: EQUAL: 92 values") and r.stdout.count("EQUAL") == 5, r.stdout
    assert "startup (cap/s0.r3.startup_after_remove.ir, ranks [3]): EQUAL: 21 values" in r.stdout, r.stdout
    # a wrong rank program is still caught and located
    (tmp_path / "out/main.r2.ir").write_text((tmp_path / "out/main.r2.ir").read_text().replace(
        "reduce_type:0", "reduce_type:1", 1))
    r = distc("verify", "cap", "--ranks", "out/main.r{rank}.ir", cwd=tmp_path)
    assert r.returncode == 1 and "out/main.r2.ir:" in r.stdout and "DIVERGED on rank 2" in r.stdout, r.stdout


def test_a_partial_capture_names_the_missing_rank(fake, tmp_path):  # noqa: F811
    r = captured(tmp_path, fake, "--ranks", "2,3")
    assert "distc shard cap --all-ranks -q -o 'out/all.r{rank}.ir'" in r.stderr
    assert "distc verify cap --ranks 'out/all.r{rank}.ir'" in r.stderr
    r = distc("verify", "cap", cwd=tmp_path)
    assert r.returncode == 1 and "cap: error: rank 0 was not captured: the folder holds ranks 2-3 " \
        "(`distc capture --ranks 0 ...` adds it)" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr and r.stdout == ""
    assert distc("shard", "cap", "--all-ranks", "-q", "-o", "out/all.r{rank}.ir", cwd=tmp_path).returncode == 0
    r = distc("verify", "cap", "--ranks", "out/all.r{rank}.ir", cwd=tmp_path)  # as the capture's hint says
    assert r.returncode == 0 and r.stdout.startswith("main: EQUAL"), r.stdout + r.stderr
    r = distc("verify", "cap", "--ranks", "out/all.r{rank}.ir", "--startup-ranks", "out/all.r{rank}.ir", cwd=tmp_path)
    assert r.returncode == 1 and "cap: error: rank 0 was not captured" in r.stderr and "--startup-ranks needs it" \
        in r.stderr, r.stderr
    r = distc("diff", "cap", "out/all.r0.ir", cwd=tmp_path)
    assert r.returncode == 1 and "cap: error: rank 0 was not captured" in r.stderr, r.stderr
    r = distc("diff", "cap", "out/all.r3.ir", cwd=tmp_path)
    assert r.returncode == 0 and "same program" in r.stdout, r.stdout + r.stderr


def test_paddles_refusal_is_named(fake, tmp_path, monkeypatch):  # noqa: F811
    monkeypatch.setenv("FAKE", "refuse")
    captured(tmp_path, fake)
    for cmd in (["verify", "cap"], ["diff", "cap", "cap/s0.r0.before_partition.ir"]):
        r = distc(*cmd, cwd=tmp_path)
        assert r.returncode == 1, r.stderr
        assert "cap: error: Paddle refused the script's stage 1 on rank 0 (AttributeError: 'list' object has no " \
               "attribute 'get_defining_op'; s1.r0.error.txt): no s1.r0.after_reshard.ir" in r.stderr, r.stderr


def test_diff_cap_takes_the_rank_and_form_of_the_other_file(fake, tmp_path):  # noqa: F811
    captured(tmp_path, fake)
    assert distc("shard", "cap", "-q", "-o", "out/main.r{rank}.ir", cwd=tmp_path).returncode == 0
    assert distc("shard", "cap", "--rank", "1", "--dense", "-q", "-o", "out/dense.r1.ir", cwd=tmp_path).returncode == 0
    for a, b, want in (("cap", "out/main.r2.ir", "cap/s1.r2.after_reshard.ir"),
                       ("out/main.r3.ir", "cap", "cap/s1.r3.after_reshard.ir"),
                       ("cap", "out/dense.r1.ir", "cap/s1.r1.dense.ir")):
        r = distc("diff", a, b, "--json", cwd=tmp_path)
        assert r.returncode == 0, r.stdout + r.stderr
        doc = json.loads(r.stdout)
        assert doc["status"] == "same" and want in (doc["a"], doc["b"]) and "dense" not in doc, doc
    r = distc("diff", "cap", "out/main.r2.ir", "--rank", "1", cwd=tmp_path)  # --rank picks Paddle's file
    assert r.returncode == 1 and "cap/s1.r1.after_reshard.ir" in r.stdout, r.stdout
    r = distc("diff", "cap", "cap", cwd=tmp_path)
    assert r.returncode == 0 and "same program" in r.stdout
    r = distc("diff", "cap", "out/main.r2.ir", "--html", "cap/s1.r2.after_reshard.ir", cwd=tmp_path)
    assert r.returncode == 2 and "is the input" in r.stderr, r.stderr


def test_verify_without_ranks_is_a_usage_error_unless_a_folder(tmp_path):
    r = distc("verify", str(STAGE1[0] / "mlp_dp2mp2_adamw.s0.r0.before_partition.ir"))
    assert r.returncode == 2 and "Missing option '--ranks' (needed unless SERIAL is a distc capture folder)" in r.stderr
    (tmp_path / "plain").mkdir()
    r = distc("verify", str(tmp_path / "plain"))
    assert r.returncode == 1 and "plain: error: is not a distc capture folder (no manifest.json)" in r.stderr
