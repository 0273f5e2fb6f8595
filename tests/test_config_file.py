"""A run config file is read like every other YAML file a user gives: missing, undecodable, invalid and
alias-bomb files are InputErrors naming the file (and the line where there is one)."""

from __future__ import annotations

from pathlib import Path

import pytest

from mheval.config import load_config
from mheval.errors import InputError


def test_a_config_file_is_read_and_flags_win(tmp_path: Path) -> None:
    path = tmp_path / "run.yaml"
    path.write_text("suite: crisis-core\nsamples: 2\njudges: [offline]\n", encoding="utf-8")
    config = load_config(path, {"samples": 3})
    assert (config.suite, config.samples, config.judges) == ("crisis-core", 3, ["offline"])


def test_an_empty_config_file_takes_the_defaults(tmp_path: Path) -> None:
    path = tmp_path / "empty.yaml"
    path.write_text("", encoding="utf-8")
    assert load_config(path) == load_config(path, {})


def test_a_missing_config_file_is_named(tmp_path: Path) -> None:
    path = tmp_path / "absent.yaml"
    with pytest.raises(InputError) as refused:
        load_config(path)
    assert refused.value.path == str(path) and refused.value.message == "run config not found"


def test_invalid_yaml_points_at_its_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("suite: crisis-core\nsamples: [1, 2\njudges: offline\n", encoding="utf-8")
    with pytest.raises(InputError, match="invalid YAML") as refused:
        load_config(path)
    assert refused.value.path == str(path) and refused.value.line in (2, 3)


def test_a_config_that_is_not_utf8_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "latin1.yaml"
    path.write_bytes("suite: crisis-core\nnote: caf\xe9\n".encode("latin-1"))
    with pytest.raises(InputError, match="cannot read the run config") as refused:
        load_config(path)
    assert refused.value.path == str(path)


def test_nested_aliases_are_refused_before_they_expand(tmp_path: Path) -> None:
    levels = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    levels += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 8)]  # 10^8 values once expanded
    path = tmp_path / "bomb.yaml"
    path.write_text("\n".join(levels) + "\nsuite: crisis-core\n", encoding="utf-8")
    with pytest.raises(InputError, match="expands to more than") as refused:
        load_config(path)
    assert refused.value.path == str(path)


def test_a_config_must_be_a_mapping(tmp_path: Path) -> None:
    path = tmp_path / "list.yaml"
    path.write_text("- crisis-core\n- offline\n", encoding="utf-8")
    with pytest.raises(InputError, match="mapping of keys to values"):
        load_config(path)
