"""OpenSCAD domains: ids and opt-in, deterministic generation, prompts that state every dimension, and
references whose rendered solids match their specs (genus, shells, bounding box); an edit task's unedited
file fails. Rendering goes through the real `cad_geometry` verifier in the sandbox."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from posttrain.cli import main
from posttrain.tasks.families import cad as cad_family
from posttrain.tasks.families.cad import MAKERS, CadConfig, CadFamily, fenced
from posttrain.tasks.families.cad.edit import FACTORS, STYLES, draw_edit
from posttrain.tasks.families.cad.part import num, substitute
from posttrain.tasks.pool import TaskPool
from posttrain.tasks.registry import DomainEntry, DomainRegistry, DomainsConfig
from posttrain.tasks.validate import validate_domain
from posttrain.types import Task
from posttrain.verify.cad import CadGeometryVerifier
from posttrain.verify.configs import CadGeometryConfig
from tests.verify.cad_fixtures import requires_openscad

FAMILIES = ("primitive", "plate", "bracket", "enclosure", "composite", "edit")
LEVELS = ("easy", "medium", "hard")
IDS = [f"3d/openscad/{f}@{lvl}" for f in FAMILIES for lvl in LEVELS]


def tasks_of(domain_id: str, n: int, seed: int = 0) -> list[Task]:
    family = CadFamily(CadConfig())
    spec = next(d for d in family.domains() if d.id == domain_id)
    return [family.task(spec, i, seed) for i in range(n)]


@pytest.fixture(scope="module")
def verifier() -> Iterator[CadGeometryVerifier]:
    verifier = CadGeometryVerifier(CadGeometryConfig())
    yield verifier
    verifier.close()


# ------------------------------------------------------------------ generation (no rendering)
def test_eighteen_domains_in_class_3d_and_opt_in() -> None:
    specs = CadFamily(CadConfig()).domains()
    assert [s.id for s in specs] == IDS and {s.cls for s in specs} == {"3d"}
    assert {s.verifier for s in specs} == {"cad_geometry"} and set(MAKERS) == set(FAMILIES)
    assert not any(isinstance(entry.family, CadConfig) for entry in DomainsConfig().domains)
    chosen = CadFamily(CadConfig(families=["plate", "edit"], levels=["hard"])).domains()
    assert [s.id for s in chosen] == ["3d/openscad/plate@hard", "3d/openscad/edit@hard"]


def test_without_openscad_the_family_offers_nothing_and_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cad_family.shutil, "which", lambda _name: None)
    family = CadFamily(CadConfig())
    assert family.domains() == [] and "openscad" in family.problems[0]


@pytest.mark.parametrize("domain_id", IDS)
def test_generation_is_deterministic_and_varied(domain_id: str) -> None:
    first, again, other_seed = tasks_of(domain_id, 40), tasks_of(domain_id, 40), tasks_of(domain_id, 40, seed=1)
    assert first == again and first != other_seed
    assert len({t.content_hash for t in first}) >= 35
    for task in first:
        assert task.answer == fenced(task.gold["reference"]) and "```openscad" in task.prompt


@pytest.mark.parametrize("domain_id", [i for i in IDS if "edit" not in i])
def test_a_modelling_prompt_states_every_dimension_and_the_conventions(domain_id: str) -> None:
    for task in tasks_of(domain_id, 30):
        prompt = task.prompt_text()
        missing = [k for k, v in task.gold["spec"]["dimensions_mm"].items() if num(v) not in prompt]
        assert not missing, (task.id, missing)
        assert "Placement:" in prompt and "$fn = 48" in prompt


@pytest.mark.parametrize("level", LEVELS)
def test_an_edit_changes_one_dimension_by_a_large_factor(level: str) -> None:
    for index in range(300):
        edit = draw_edit(STYLES[level], random.Random(index))
        changed = {k for k in edit.before.values if edit.before.values[k] != edit.after.values[k]}
        assert changed == {edit.name}
        ratio = edit.new_mm / edit.old_mm
        assert any(low <= ratio <= high for low, high in FACTORS), ratio


def test_edit_levels_show_variables_or_numbers() -> None:
    easy, hard = tasks_of("3d/openscad/edit@easy", 1)[0], tasks_of("3d/openscad/edit@hard", 1)[0]
    easy_change, hard_change = easy.gold["edit"], hard.gold["edit"]
    assert f"{easy_change['dimension']} = " in easy.prompt_text() and f"`{easy_change['dimension']}`" in easy.prompt_text()
    assert f"{hard_change['dimension']} = " not in hard.prompt_text()
    assert easy.gold["original"] in easy.prompt_text() and hard.gold["original"] in hard.prompt_text()


def test_literal_sources_keep_named_arguments() -> None:
    body = "linear_extrude(height = height) square(height == 2 ? width : 1);"
    assert substitute(body, {"height": 3, "width": 2.5}) == "linear_extrude(height = 3) square(3 == 2 ? 2.5 : 1);"
    assert [num(v) for v in (12.0, 12.5, -0.0, 0.25, 1e-9)] == ["12", "12.5", "0", "0.25", "0"]


def test_the_cli_lists_the_3d_class(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "domains.yaml"
    path.write_text("domains:\n  - family: {kind: cad, levels: [easy]}\n  - family: {kind: arithmetic, ops: [add]}\n")
    assert main(["domains", "list", "--class", "3d", "--domains", str(path), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [d["id"] for d in doc["domains"]] == [i for i in IDS if i.endswith("@easy")]


def test_show_prints_openscad_vectors_as_written(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "domains.yaml"
    path.write_text("domains:\n  - family: {kind: cad, families: [plate], levels: [medium]}\n")
    assert main(["domains", "show", "3d/openscad/plate@medium", "--num-tasks", "1", "--domains", str(path)]) == 0
    assert "cube([length, width, thickness]);" in capsys.readouterr().out  # not eaten as rich markup


# ------------------------------------------------------------------ rendered references
def render_checks(verifier: CadGeometryVerifier, tasks: list[Task]) -> list[str]:
    """Problems of each task's reference: it must pass against itself, with the spec's topology and box."""
    problems = []
    for task, score in zip(tasks, verifier.score_many([(t, t.answer or "") for t in tasks]), strict=True):
        spec, details = task.gold["spec"], score.details
        if not score.passed or score.reward != 1.0:
            problems.append(f"{task.id}: gold scored {score.reward} {score.message}")
        elif (details["genus"], details["shells"]) != (spec["holes"], spec["shells"]):
            problems.append(f"{task.id}: genus/shells {details['genus']}/{details['shells']} vs spec {spec}")
        elif spec["bounds_mm"] is not None and flat(details["bounds_mm"]) != pytest.approx(flat(spec["bounds_mm"]), abs=1e-3):
            problems.append(f"{task.id}: bounds {details['bounds_mm']} vs spec {spec['bounds_mm']}")
    return problems


def flat(bounds: list[list[float]]) -> list[float]:
    return [*bounds[0], *bounds[1]]


def unedited_scores(verifier: CadGeometryVerifier, tasks: list[Task]) -> list[Any]:
    return verifier.score_many([(t, fenced(t.gold["original"])) for t in tasks])


@requires_openscad
def test_easy_references_render_to_their_specs(verifier: CadGeometryVerifier) -> None:
    tasks = [t for domain_id in IDS if domain_id.endswith("@easy") for t in tasks_of(domain_id, 1)]
    assert render_checks(verifier, tasks) == []


@requires_openscad
def test_returning_the_file_unedited_fails(verifier: CadGeometryVerifier) -> None:
    tasks = [t for level in LEVELS for t in tasks_of(f"3d/openscad/edit@{level}", 1)]
    for task, score in zip(tasks, unedited_scores(verifier, tasks), strict=True):
        assert not score.passed and score.reward < 0.9 and score.details["status"] == "ok", (task.id, score)


@pytest.mark.slow
@requires_openscad
@pytest.mark.parametrize("domain_id", IDS)
def test_every_reference_renders_to_its_spec(verifier: CadGeometryVerifier, domain_id: str) -> None:
    assert render_checks(verifier, tasks_of(domain_id, 6, seed=7)) == []


@pytest.mark.slow
@requires_openscad
@pytest.mark.parametrize("level", LEVELS)
def test_returning_the_file_unedited_fails_across_many_edits(verifier: CadGeometryVerifier, level: str) -> None:
    tasks = tasks_of(f"3d/openscad/edit@{level}", 12, seed=5)
    assert all(not s.passed for s in unedited_scores(verifier, tasks))


@pytest.mark.slow
@requires_openscad
def test_every_domain_validates() -> None:
    pool = TaskPool(DomainRegistry([DomainEntry(family=CadConfig())]), seed=3)
    failures = {d: validate_domain(pool, d, num_tasks=3).failures for d in pool.registry.ids()}
    assert {d: f for d, f in failures.items() if f} == {}
