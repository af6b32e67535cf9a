from pathlib import Path

import pytest

from skillopt_sleep import paths
from skillopt_sleep.config import SleepConfig, load_config, set_config_value
from skillopt_sleep.errors import ConfigError


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_defaults_apply_when_there_is_no_config_file():
    config = load_config(environ={})
    assert config == SleepConfig()
    assert config.gate_mode == "on"
    assert config.lookback_hours == 72


def test_later_sources_win_file_then_environment_then_flags(tmp_path):
    config_file = write(tmp_path / "c.toml", 'gate_mode = "off"\nworkers = 2\nedit_budget = 5\n')
    config = load_config(config_file, cli_overrides={"edit_budget": 7, "scope": None},
                         environ={"SKILLOPT_SLEEP_WORKERS": "3"})
    assert config.gate_mode == "off"  # from the file
    assert config.workers == 3  # environment beats the file
    assert config.edit_budget == 7  # the flag beats both
    assert config.scope == "project"  # a flag left unset (None) changes nothing


def test_unknown_key_in_the_file_names_the_file_and_the_key(tmp_path):
    config_file = write(tmp_path / "c.toml", "gate_mdoe = 'off'\n")
    with pytest.raises(ConfigError) as error:
        load_config(config_file, environ={})
    assert str(config_file) in str(error.value)
    assert "gate_mdoe" in str(error.value)


def test_invalid_value_in_the_file_names_the_file_and_the_key(tmp_path):
    config_file = write(tmp_path / "c.toml", "gate_mode = 'sometimes'\n")
    with pytest.raises(ConfigError) as error:
        load_config(config_file, environ={})
    assert str(config_file) in str(error.value) and "gate_mode" in str(error.value)


def test_invalid_toml_is_a_config_error_naming_the_file(tmp_path):
    config_file = write(tmp_path / "c.toml", "gate_mode = \n")
    with pytest.raises(ConfigError, match="invalid TOML"):
        load_config(config_file, environ={})


def test_invalid_environment_value_names_the_variable():
    with pytest.raises(ConfigError) as error:
        load_config(environ={"SKILLOPT_SLEEP_WORKERS": "many"})
    assert "SKILLOPT_SLEEP_WORKERS" in str(error.value)


def test_unknown_environment_key_is_rejected_but_path_overrides_are_not_keys():
    with pytest.raises(ConfigError, match="'bogus'"):
        load_config(environ={"SKILLOPT_SLEEP_BOGUS": "1"})
    config = load_config(environ={"SKILLOPT_SLEEP_HOME": "/tmp/x", "SKILLOPT_SLEEP_STATE_DIR": "/tmp/y",
                                  "SKILLOPT_SLEEP_MODELS_FIND_LINKS": "/tmp/wheels"})  # model_store's offline mirror
    assert config == SleepConfig()


def test_an_explicit_missing_config_file_is_an_error(tmp_path):
    with pytest.raises(ConfigError, match="not found"):
        load_config(tmp_path / "nope.toml", environ={})


def test_default_config_file_lives_in_the_overridable_config_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("SKILLOPT_SLEEP_CONFIG_DIR", str(tmp_path / "cfg"))
    assert paths.config_file() == tmp_path / "cfg" / "config.toml"
    monkeypatch.setenv("SKILLOPT_SLEEP_CONFIG", str(tmp_path / "other.toml"))
    assert paths.config_file() == tmp_path / "other.toml"


def test_set_writes_a_typed_value_and_keeps_comments_and_other_keys(tmp_path):
    config_file = write(tmp_path / "c.toml", "# my settings\nworkers = 2 # two cores\n")
    set_config_value("gate_mode", "off", config_file)
    set_config_value("edit_budget", "4", config_file)
    text = config_file.read_text()
    assert "# my settings" in text and "# two cores" in text
    config = load_config(config_file, environ={})
    assert (config.gate_mode, config.edit_budget, config.workers) == ("off", 4, 2)
    assert "edit_budget = 4" in text  # an int, not the string "4"


def test_set_rejects_an_invalid_value_and_leaves_the_file_unchanged(tmp_path):
    config_file = write(tmp_path / "c.toml", "workers = 2\n")
    with pytest.raises(ConfigError, match="gate_mode"):
        set_config_value("gate_mode", "maybe", config_file)
    with pytest.raises(ConfigError, match="nonsense"):
        set_config_value("nonsense", "1", config_file)
    assert config_file.read_text() == "workers = 2\n"


def test_public_dump_masks_the_api_key():
    config = SleepConfig(api_key="sk-secret-value-123456")
    assert config.public_dump()["api_key"] == "***"


def test_lr_scheduler_the_old_name_of_edit_budget_schedule_is_read_from_a_file_with_a_warning(tmp_path):
    config_file = write(tmp_path / "c.toml", 'lr_scheduler = "cosine"\n')
    with pytest.warns(DeprecationWarning, match="edit_budget_schedule"):
        config = load_config(config_file, environ={})
    assert config.edit_budget_schedule == "cosine"
    assert "lr_scheduler" not in config.public_dump()


def test_a_night_replays_at_most_100_val_tasks():
    with pytest.raises(ConfigError, match="less than or equal to 100"):
        load_config(environ={"SKILLOPT_SLEEP_GATE_MAX_VAL": "101"})
    assert load_config(environ={"SKILLOPT_SLEEP_GATE_MAX_VAL": "100"}).gate_max_val == 100
