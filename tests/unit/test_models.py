import json
from pathlib import Path

from skillopt_sleep.models import Check, Diagnostics, ReplayResult, diagnostics_json_schema

DOCS = Path(__file__).resolve().parents[2] / "docs"


def test_exported_diagnostics_schema_matches_the_model():
    exported = json.loads((DOCS / "diagnostics.schema.json").read_text())
    assert exported == json.loads(json.dumps(diagnostics_json_schema())), (
        "docs/diagnostics.schema.json is stale: regenerate it with "
        "python -c 'import json; from skillopt_sleep.models import diagnostics_json_schema as s; "
        "print(json.dumps(s(), indent=2, sort_keys=True))' > docs/diagnostics.schema.json")


def test_soft_score_is_clamped_to_the_unit_interval():
    assert ReplayResult(task_id="t", soft=7).soft == 1.0
    assert ReplayResult(task_id="t", soft=-0.5).soft == 0.0


def test_unknown_fields_are_rejected_so_typos_in_stored_files_surface():
    try:
        Check(op="contains", value="x", bogus=1)
    except Exception as exc:
        assert "bogus" in str(exc)
    else:
        raise AssertionError("extra field accepted")


def test_every_diagnostics_field_is_documented_in_the_readme():
    readme = (DOCS.parent / "README.md").read_text()
    missing = [name for name in Diagnostics.model_fields if f"`{name}`" not in readme]
    assert not missing, f"README 'Diagnostics fields' lacks: {missing}"


def test_every_config_key_is_documented_in_the_readme():
    from skillopt_sleep.config import SleepConfig

    readme = (DOCS.parent / "README.md").read_text()
    missing = [name for name in SleepConfig.model_fields if f"`{name}`" not in readme]
    assert not missing, f"README 'Configuration' lacks: {missing}"
