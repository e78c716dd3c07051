"""Bad data: every verb that reads examples stops with one clear error naming file, line and field,
writes nothing, or with ``--skip-bad`` skips and counts the bad lines.

Faults injected into an otherwise valid unified-schema file (generated Hi-ToM/ToMi rows): a missing
field, a wrong type, an empty story, non-UTF-8 bytes, a duplicated id, an answer that is not in the
story, an answer that is not among the choices, a JSONL line cut short, a line that is not an object,
an unknown field. Then the same kinds of faults in the original benchmark files the loaders read,
and unknown benchmark, data set and recipe names.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from reliability_helpers import REPO_ROOT, SHARED_DATA, jsonl_rows, leftover_temp_files

from tomrl.cli import main
from tomrl.data_checks import answer_in_story, read_checked_examples, validate_answers_in_story
from tomrl.io import BadInputError
from tomrl.schema import ReadReport, read_examples

# --------------------------------------------------------------------------- fault catalogue


def _rows(generated_examples) -> list[dict]:
    hitom, tomi = generated_examples
    return [e.to_dict() for e in hitom] + [e.to_dict() for e in tomi]


def _drop(name):
    def change(row):
        del row[name]
        return row

    return change


def _set(name, value):
    def change(row):
        row[name] = value
        return row

    return change


# name -> (line to corrupt (1-based), how, substring the error must contain besides file:line)
# A change is a function of the row (returning a row or raw bytes) or, for the duplicate, special.
FAULTS = {
    "missing field": (3, _drop("question"), "field 'question': missing"),
    "wrong type": (2, _set("order", "two"), "field 'order': expected an integer"),
    "empty story": (4, _set("story", "  \n "), "field 'story': empty"),
    "null answer": (5, _set("answer", None), "field 'answer': expected a string"),
    "non-UTF-8 bytes": (4, lambda row: json.dumps(row).encode()[:40] + b"\xff\xfe" + json.dumps(row).encode()[40:], "not valid UTF-8"),
    "duplicated id": (5, "duplicate", "field 'id': duplicate id"),
    "answer not in story (ToMi)": (8, _set("answer", "purple_bathtub"), "field 'answer': 'purple_bathtub' never occurs in the story"),
    "answer not among choices (Hi-ToM)": (2, _set("answer", "purple_bathtub"), "field 'answer': 'purple_bathtub' is not one of the choices"),
    "truncated last line": (10, lambda row: json.dumps(row).encode()[:57], "invalid JSON"),
    "not an object": (6, lambda row: b"[1, 2, 3]", "expected a JSON object, got list"),
    "unknown field": (7, _set("colour", "red"), "field 'colour': unknown field"),
}


def write_faulty(path: Path, rows: list[dict], fault: str) -> tuple[int, str]:
    """Write ``rows`` with ``fault`` injected; returns (bad line number, expected message part)."""
    line, change, expected = FAULTS[fault]
    lines: list[bytes] = []
    for number, row in enumerate(rows, start=1):
        row = json.loads(json.dumps(row))
        if number == line:
            if change == "duplicate":
                row["id"] = rows[0]["id"]
                value = json.dumps(row).encode()
            else:
                changed = change(row)
                value = changed if isinstance(changed, bytes) else json.dumps(changed).encode()
        else:
            value = json.dumps(row).encode()
        lines.append(value)
    data = b"\n".join(lines)
    if fault != "truncated last line":
        data += b"\n"
    path.write_bytes(data)
    return line, expected


def assert_one_clear_error(err: str, path: Path, line: int, expected: str) -> None:
    """Exactly one error line, naming the file, the line and the field or fault."""
    lines = [l for l in err.strip().splitlines() if l.strip()]
    assert len(lines) == 1, f"expected one error line, got:\n{err}"
    assert "Traceback" not in err
    assert lines[0].startswith("tomrl: error: "), lines[0]
    assert f"{path}:{line}" in lines[0], lines[0]
    assert expected in lines[0], lines[0]


@pytest.fixture
def rows(generated_examples):
    rows = _rows(generated_examples)
    assert len(rows) == 10
    return rows


# --------------------------------------------------------------------------- the library


@pytest.mark.parametrize("fault", list(FAULTS))
def test_read_checked_examples_names_file_line_and_field(tmp_path, rows, fault):
    path = tmp_path / "data.jsonl"
    line, expected = write_faulty(path, rows, fault)
    with pytest.raises(BadInputError) as error:
        read_checked_examples(path)
    message = str(error.value)
    assert message.startswith(f"{path}:{line}:") and expected in message, message
    report = ReadReport(str(path))
    kept = read_checked_examples(path, skip_bad=True, report=report)
    assert len(kept) == 9 and len(report.skipped) == 1 and f"{path}:{line}:" in report.skipped[0]


def test_answer_in_story_normalises_and_matches_whole_words():
    story = "Anna put the apple in the Green_Drawer.\nThe toolbox is here."
    assert answer_in_story("green_drawer", story)
    assert answer_in_story("GREEN  drawer", story)
    assert not answer_in_story("box", story)  # inside "toolbox": not the same place
    assert not answer_in_story("", story)
    assert not answer_in_story("purple_bathtub", story)


def test_answer_check_leaves_yes_no_and_attitude_sources_alone(rows):
    from tomrl.schema import example_from_dict

    yes_no = example_from_dict({**rows[6], "source": "exploretom", "answer": "yes"}, "x")
    attitude = example_from_dict({**rows[6], "source": "opentom", "answer": "negative"}, "x")
    broken = example_from_dict({**rows[6], "answer": "purple_bathtub"}, "x")
    assert validate_answers_in_story([yes_no, attitude]) == [yes_no, attitude]
    with pytest.raises(BadInputError, match=r"example '.*' \(tomrl-tomi\): field 'answer'"):
        validate_answers_in_story([broken])


@pytest.mark.skipif(not (SHARED_DATA / "hitom").is_dir(), reason="shared benchmark data absent")
@pytest.mark.parametrize("name", ["hitom", "tomi", "tomrl-paper-train", "tomrl-paper-test-merged"])
def test_real_location_data_passes_the_answer_check(name):
    from tomrl.loaders.registry import load

    examples = load(name)
    assert validate_answers_in_story(examples) == examples


def test_generated_data_passes_the_answer_check(generated_examples):
    hitom, tomi = generated_examples
    assert validate_answers_in_story(hitom + tomi) == hitom + tomi


# --------------------------------------------------------------------------- tomrl data check


@pytest.mark.parametrize("fault", list(FAULTS))
def test_data_check_stops_with_one_error_and_writes_nothing(tmp_path, rows, fault, capsys):
    path = tmp_path / "data.jsonl"
    out = tmp_path / "clean.jsonl"
    line, expected = write_faulty(path, rows, fault)
    assert main(["data", "check", str(path), "--out", str(out)]) == 2
    assert_one_clear_error(capsys.readouterr().err, path, line, expected)
    assert not out.exists() and not leftover_temp_files(tmp_path)


@pytest.mark.parametrize("fault", ["missing field", "non-UTF-8 bytes", "duplicated id", "answer not in story (ToMi)", "truncated last line"])
def test_data_check_skip_bad_counts_and_keeps_the_rest(tmp_path, rows, fault, capsys):
    path = tmp_path / "data.jsonl"
    out = tmp_path / "clean.jsonl"
    line, _ = write_faulty(path, rows, fault)
    assert main(["data", "check", str(path), "--skip-bad", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "9 rows passed, 1 skipped" in printed and f"{path}:{line}" in printed
    assert len(read_examples(out)) == 9
    assert main(["data", "check", str(out)]) == 0  # the cleaned file is clean


# --------------------------------------------------------------------------- other verbs of the finished stages


@pytest.mark.parametrize("fault", ["missing field", "non-UTF-8 bytes", "truncated last line"])
def test_generate_exclude_file_errors_and_skip_bad(tmp_path, rows, fault, capsys):
    path = tmp_path / "train.jsonl"
    out = tmp_path / "test.jsonl"
    line, expected = write_faulty(path, rows, fault)
    args = ["data", "generate", "tomi", "--n", "4", "--split", "test", "--exclude", str(path), "--out", str(out)]
    assert main(args) == 2
    assert_one_clear_error(capsys.readouterr().err, path, line, expected)
    assert not out.exists() and not leftover_temp_files(tmp_path)
    assert main([*args, "--skip-bad"]) == 0
    assert f"{path}: skipped 1 bad lines" in capsys.readouterr().out
    generated = read_examples(out)
    assert not {e.story for e in generated} & {r["story"] for r in rows}


def test_skipped_exclude_lines_still_exclude_their_stories(tmp_path, generated_examples):
    """Skipping a bad line of an exclusion file must not let its story back in."""
    from tomrl.generators.dataset import excluded_story_keys

    hitom, _ = generated_examples
    path = tmp_path / "train.jsonl"
    rows = [e.to_dict() for e in hitom]
    rows[1]["order"] = "two"  # a schema error; the story itself is fine
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    keys = excluded_story_keys([str(path)], skip_bad=True, reports=[])
    assert hitom[1].story in keys and hitom[1].story_id in keys


@pytest.mark.parametrize("fault", ["missing field", "wrong type", "truncated last line"])
def test_verify_generated_file_errors_and_skip_bad(tmp_path, rows, fault, capsys):
    path = tmp_path / "generated.jsonl"
    line, expected = write_faulty(path, rows, fault)
    assert main(["data", "verify", str(path), "--json", str(tmp_path / "v.json")]) == 2
    assert_one_clear_error(capsys.readouterr().err, path, line, expected)
    assert not (tmp_path / "v.json").exists()
    assert main(["data", "verify", str(path), "--skip-bad", "--json", str(tmp_path / "v.json")]) == 0
    assert "skipped 1 bad lines" in capsys.readouterr().out
    assert len(json.loads((tmp_path / "v.json").read_text())["skipped_lines"]) == 1


# --------------------------------------------------------------------------- verbs of the other stages


@pytest.mark.parametrize("fault", ["missing field", "non-UTF-8 bytes", "duplicated id", "truncated last line",
                                   "answer not in story (ToMi)", "answer not among choices (Hi-ToM)"])
def test_audit_stops_with_one_error_and_writes_nothing(tmp_path, rows, fault, capsys):
    path = tmp_path / "test.jsonl"
    line, expected = write_faulty(path, rows, fault)
    report = tmp_path / "audit.json"
    assert main(["data", "audit", "--test", str(path), "--json", str(report), "--markdown", str(tmp_path / "a.md")]) == 2
    assert_one_clear_error(capsys.readouterr().err, path, line, expected)
    assert not report.exists() and not (tmp_path / "a.md").exists()


@pytest.mark.parametrize("fault", ["missing field", "non-UTF-8 bytes", "answer not in story (ToMi)", "truncated last line"])
def test_audit_skip_bad_counts_and_audits_the_rest(tmp_path, rows, fault, capsys):
    path = tmp_path / "test.jsonl"
    line, _ = write_faulty(path, rows, fault)
    train = tmp_path / "train.jsonl"
    write_faulty(train, rows, "missing field")  # the training file's bad line is skipped too
    report, markdown = tmp_path / "audit.json", tmp_path / "a.md"
    args = ["data", "audit", "--train", str(train), "--test", str(path), "--json", str(report), "--markdown", str(markdown)]
    assert main([*args, "--skip-bad"]) == 0
    err = capsys.readouterr().err
    assert f"{path}: skipped 1 bad lines, kept 9 rows" in err and f"{path}:{line}:" in err and f"{train}: skipped 1 bad lines" in err
    audited = json.loads(report.read_text())
    assert audited["tests"][0]["rows"] == 9 and audited["train"]["rows"] == 9
    assert len(audited["skipped_lines"][str(path)]) == 1 and f"{path}:{line}:" in audited["skipped_lines"][str(path)][0]
    assert f"- Skipped (--skip-bad): 1 bad lines of `{path}`" in markdown.read_text()


REWARD_FAULTS = {
    "missing completion": (2, b'{"answer": "box"}', "field 'completion': missing"),
    "completion of the wrong type": (3, b'{"completion": 5, "answer": "box"}', "field 'completion'"),
    "answer of the wrong type": (2, b'{"completion": "x", "answer": ["box"]}', "field 'answer'"),
    "non-UTF-8 bytes": (3, b'{"completion": "\xff", "answer": "box"}', "not valid UTF-8"),
    "truncated last line": (3, b'{"completion": "</think><answer>bo', "invalid JSON"),
}


@pytest.mark.parametrize("fault", list(REWARD_FAULTS))
def test_reward_score_stops_with_one_error_and_writes_nothing(tmp_path, fault, capsys):
    line, bad, expected = REWARD_FAULTS[fault]
    good = b'{"completion": " r</think><answer>box</answer>", "answer": "box"}'
    lines = [good, good, good]
    lines[line - 1] = bad
    path = tmp_path / "completions.jsonl"
    path.write_bytes(b"\n".join(lines) + (b"" if fault == "truncated last line" else b"\n"))
    out = tmp_path / "scored.jsonl"
    assert main(["reward", "score", "--reward", "strict", "--input", str(path), "--out", str(out)]) == 2
    assert_one_clear_error(capsys.readouterr().err, path, line, expected)
    assert not out.exists() and not leftover_temp_files(tmp_path)


@pytest.mark.parametrize("fault", list(REWARD_FAULTS))
def test_reward_score_skip_bad_counts_and_scores_the_rest(tmp_path, fault, capsys):
    line, bad, _ = REWARD_FAULTS[fault]
    good = [b'{"id": %d, "completion": " r</think><answer>box</answer>", "answer": "box"}' % i for i in (1, 2, 3)]
    lines = list(good)
    lines[line - 1] = bad
    path = tmp_path / "completions.jsonl"
    path.write_bytes(b"\n".join(lines) + (b"" if fault == "truncated last line" else b"\n"))
    out = tmp_path / "scored.jsonl"
    assert main(["reward", "score", "--reward", "strict", "--input", str(path), "--out", str(out), "--skip-bad"]) == 0
    printed = capsys.readouterr().out
    assert f"{path}: skipped 1 bad lines" in printed and f"{path}:{line}:" in printed and "2 rows" in printed
    scored = jsonl_rows(out)
    assert [r["id"] for r in scored] == [i for i in (1, 2, 3) if i != line] and all(r["score"] == 3.0 for r in scored)


@pytest.mark.parametrize("fault", ["missing field", "truncated last line", "non-UTF-8 bytes"])
def test_eval_user_file_errors_before_any_output(tmp_path, fault, capsys):
    """A user-supplied benchmark file (GSM8K format) that is bad stops eval before it writes a run folder."""
    line, expected = {"missing field": (2, "field 'answer'"), "truncated last line": (3, "invalid JSON"),
                      "non-UTF-8 bytes": (2, "not valid UTF-8")}[fault]
    good = b'{"question": "2 + 2?", "answer": "2 + 2 = 4 #### 4"}'
    bad = {"missing field": b'{"question": "1 + 1?"}', "truncated last line": b'{"question": "3 + 3?", "ans',
           "non-UTF-8 bytes": b'{"question": "\xff", "answer": "#### 1"}'}[fault]
    lines = [good, good, good]
    lines[line - 1] = bad
    path = tmp_path / "gsm8k.jsonl"
    path.write_bytes(b"\n".join(lines) + (b"" if fault == "truncated last line" else b"\n"))
    out = tmp_path / "run"
    code = main(["eval", "--model", "tiny-qwen2", "--benchmark", "gsm8k", "--out", str(out), f"data_paths={{gsm8k: '{path}'}}"])
    assert code == 2
    assert_one_clear_error(capsys.readouterr().err, path, line, expected)
    assert not out.exists()


def test_train_bad_data_file_errors_and_leaves_no_run_folder(tmp_path, rows, capsys):
    path = tmp_path / "train.jsonl"
    line, expected = write_faulty(path, rows, "missing field")
    run_dir = tmp_path / "run"
    code = main(["train", "--config", str(REPO_ROOT / "configs/train/smoke_cpu.yaml"), f"run_dir={run_dir}", "data.generate=null",
                 "data.generate_overrides=[]", "data.validation_overrides=[]", f"data.train_files=['{path}']"])
    assert code == 2
    assert f"{path}:{line}" in capsys.readouterr().err
    assert not run_dir.exists()


def test_train_skip_bad_trains_on_the_rest_and_lists_what_it_skipped(tmp_path, rows, capsys):
    path = tmp_path / "train.jsonl"
    line, expected = write_faulty(path, rows, "missing field")
    run_dir = tmp_path / "run"
    code = main(["train", "--config", str(REPO_ROOT / "configs/train/smoke_cpu.yaml"), "--skip-bad", f"run_dir={run_dir}", "data.generate=null",
                 "data.generate_overrides=[]", "data.validation_overrides=[]", f"data.train_files=['{path}']", "max_steps=1",
                 "eval.at_start=false", "eval.every_steps=0", "progress=false", "report_to=[]"])
    assert code == 0
    assert "skipped 1 bad data rows" in capsys.readouterr().out
    skipped = json.loads((run_dir / "data" / "skipped.json").read_text())
    assert skipped["skipped_lines"] == 1 and f"{path}:{line}" in skipped["reasons"][0] and expected in skipped["reasons"][0]
    assert len(jsonl_rows(run_dir / "data" / "train.jsonl")) == len(rows) - 1
    assert json.loads((run_dir / "summary.json").read_text())["skipped_bad_rows"] == 1


def test_eval_skip_bad_counts_bad_rows_in_results(tmp_path, capsys):
    good = [b'{"question": "%d + %d?", "answer": "#### %d"}' % (i, i, 2 * i) for i in (1, 2)]
    path = tmp_path / "gsm8k.jsonl"
    path.write_bytes(b"\n".join([good[0], b'{"question": "1 + 1?"}', good[1]]) + b"\n")
    out = tmp_path / "run"
    code = main(["eval", "--model", "tiny-qwen2", "--benchmark", "gsm8k", "--out", str(out), "--skip-bad",
                 f"data_paths={{gsm8k: '{path}'}}", "max_new_tokens=4"])
    assert code == 0
    assert f"skipped 1 bad rows (skip_bad), the first: {path}:2: field 'answer'" in capsys.readouterr().out
    entry = json.loads((out / "results.json").read_text())["benchmarks"]["gsm8k"]
    assert entry["skipped_bad_rows"] == 1 and entry["n_available"] == 2 and entry["n_answered"] == 2


# --------------------------------------------------------------------------- loaders: the original files


LOADER_FILES = {  # loader -> (file under the shared data folder, options, a field every row needs)
    "hitom": ("hitom/hitom_data.jsonl", {}, "story"),
    "tomi": ("tomi/tomi_test.jsonl", {"split": "test"}, "question"),
    "exploretom": ("exploretom/exploretom_sample.jsonl", {}, "question"),
    "tomrl-paper-hitom600": ("tomrl_paper/hitom_600_eval.jsonl", {}, "story"),
}


def _loader_fault(source: Path, target: Path, fault: str, field: str) -> int:
    lines = source.read_bytes().split(b"\n")[:5]
    row = json.loads(lines[2])
    if fault == "missing field":
        del row[field]
        lines[2] = json.dumps(row).encode()
    elif fault == "wrong type":
        row[field] = 12345
        lines[2] = json.dumps(row).encode()
    elif fault == "non-UTF-8 bytes":
        lines[2] = lines[2][:30] + b"\xc3\x28" + lines[2][30:]
    elif fault == "truncated last line":
        lines = lines[:3]
        lines[2] = lines[2][: len(lines[2]) // 2]
    target.write_bytes(b"\n".join(lines) + (b"" if fault == "truncated last line" else b"\n"))
    return 3


@pytest.mark.skipif(not SHARED_DATA.is_dir(), reason="shared benchmark data absent")
@pytest.mark.parametrize("fault", ["missing field", "wrong type", "non-UTF-8 bytes", "truncated last line"])
@pytest.mark.parametrize("loader", list(LOADER_FILES))
def test_loader_on_a_corrupted_original_file(tmp_path, loader, fault, capsys):
    relative, options, field = LOADER_FILES[loader]
    source = SHARED_DATA / relative
    if not source.is_file():
        pytest.skip(f"{source} absent")
    bad = tmp_path / source.name
    line = _loader_fault(source, bad, fault, field)
    out = tmp_path / "out.jsonl"
    code = main(["data", "load", loader, *[f"{k}={v}" for k, v in options.items()], "--path", str(bad), "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2, err
    first = err.strip().splitlines()[0]
    assert "Traceback" not in err and re.search(rf"{re.escape(str(bad))}:(?: row )?{line}\b", first), first
    if fault in ("missing field", "wrong type"):
        assert f"field '{field}'" in first, first
    assert not out.exists() and not leftover_temp_files(tmp_path)


# --------------------------------------------------------------------------- unknown names


@pytest.mark.parametrize(
    "args, expected",
    [
        (["eval", "--model", "tiny-qwen2", "--benchmark", "hitom600,nope", "--out", "{tmp}/run"], "unknown benchmark 'nope'"),
        (["data", "load", "hitomm", "--out", "{tmp}/x.jsonl"], "unknown data set 'hitomm' (did you mean 'hitom'?)"),
        (["data", "load", "recipe:nope", "--out", "{tmp}/recipe"], "unknown recipe 'nope'"),
        (["data", "audit", "--test", "nope"], "nope: no such file, and not a data set name"),
        (["data", "load", "tomi", "split=tarin", "--out", "{tmp}/x.jsonl"], "option 'split' must be one of"),
        (["data", "verify", "{tmp}/missing.jsonl"], "missing.jsonl: not 'hitom', 'tomi' or an existing JSONL file"),
        (["data", "check", "{tmp}/missing.jsonl"], "missing.jsonl: file not found"),
    ],
    ids=["eval benchmark", "data set", "recipe", "audit input", "loader option", "verify file", "check file"],
)
def test_unknown_names_give_one_clear_error(tmp_path, args, expected, capsys):
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert expected in err and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("args", [["reward", "score", "--reward", "nope", "--input", "x", "--out", "y"], ["data", "generate", "nope", "--out", "y"]])
def test_unknown_choice_names_are_argparse_errors(args, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(args)
    assert exit_info.value.code == 2 and "invalid choice: 'nope'" in capsys.readouterr().err


def test_train_unknown_recipe_fails_before_any_work(tmp_path, capsys):
    run_dir = tmp_path / "run"
    code = main(["train", "--config", str(REPO_ROOT / "configs/train/smoke_cpu.yaml"), f"run_dir={run_dir}", "data.generate=null",
                 "data.generate_overrides=[]", "data.validation_overrides=[]", "data.recipe=nope"])
    assert code == 2 and "unknown recipe 'nope'" in capsys.readouterr().err
    assert not run_dir.exists()
