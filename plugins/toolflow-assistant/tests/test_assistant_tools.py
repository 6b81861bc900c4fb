"""The assistant's and the worker's tools, called directly on the demo world."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio
from toolflow_assistant import tools, worker
from toolflow_assistant.world import World, current, reset

# --- looking around ------------------------------------------------------------------------------


def test_inspect_location_levels_of_detail() -> None:
    """brief names exits and characters; normal adds the description and objects; detailed adds dbrefs and doors."""
    brief = tools.inspect_location(detail_level="brief")
    assert brief == {
        "location": {"dbref": "#2", "name": "Town Square"},
        "exits": ["north", "east", "west"],
        "characters": ["Aldric"],
    }
    normal = tools.inspect_location()
    assert normal["objects"] == ["rusty sword", "notice board", "north door"]
    assert normal["location"]["description"].startswith("A cobbled square")
    detailed = tools.inspect_location(detail_level="detailed")
    assert detailed["exits"][0] == {"name": "north", "to": "North Gate", "door": "closed"}
    assert detailed["characters"] == [
        {"dbref": "#11", "name": "Aldric", "type": "character", "description": "A broad-shouldered builder."}
    ]
    assert detailed["time"] == "2025-12-06T12:00:00Z"


def test_inspect_location_refuses_unknown_detail_level() -> None:
    """An unknown level is a failure naming the allowed ones."""
    assert tools.inspect_location(detail_level="max") == {
        "success": False,
        "error": "detail_level must be one of brief, normal, detailed, got 'max'",
    }


def test_search_object_by_name_alias_and_prefix() -> None:
    """Exact names and aliases match first; otherwise names starting with the text."""
    assert tools.search_object(name="Rusty Sword")["matches"] == [
        {"dbref": "#20", "name": "rusty sword", "type": "object", "location": "#2"}
    ]
    assert [m["dbref"] for m in tools.search_object(name="board")["matches"]] == ["#21"]
    assert [m["dbref"] for m in tools.search_object(name="not")["matches"]] == ["#21"]
    assert tools.search_object(name="dragon") == {"matches": [], "count": 0}


def test_search_object_scopes_and_limit() -> None:
    """inventory sees what the assistant carries; global sees everything; limit caps the matches, not the count."""
    assert [m["name"] for m in tools.search_object(name="key", scope="inventory")["matches"]] == ["brass key"]
    swords = tools.search_object(name="sword", scope="global", limit=1)
    assert swords["count"] == 2
    assert len(swords["matches"]) == 1


def test_search_object_by_dbref_hints_at_global_scope() -> None:
    """A dbref that exists elsewhere is not found nearby, with a hint."""
    assert tools.search_object(dbref="#1234", scope="global")["matches"][0]["name"] == "old map"
    nearby = tools.search_object(dbref="#1234")
    assert nearby["count"] == 0
    assert nearby["hint"] == "#1234 exists elsewhere; search with scope 'global'"


def test_search_object_needs_exactly_one_key() -> None:
    """Neither or both of name and dbref is a failure."""
    assert tools.search_object()["success"] is False
    assert tools.search_object(name="x", dbref="#2")["success"] is False


def test_get_attributes_by_names_pattern_or_all() -> None:
    """Named attributes (with the missing ones listed), a glob, or everything."""
    named = tools.get_attributes(target="me", names=["mood", "hunger"])
    assert named == {
        "target": {"dbref": "#10", "name": "Sage", "type": "character"},
        "attributes": {"mood": "curious"},
        "missing": ["hunger"],
    }
    assert tools.get_attributes(target="#1234", pattern="DESC*")["attributes"] == {
        "desc": "A faded map of the town, drawn in brown ink.",
        "desc_short": "a faded map",
    }
    assert set(tools.get_attributes(target="here")["attributes"]) == {"climate", "desc"}


def test_get_attributes_of_unknown_or_ambiguous_target() -> None:
    """Unknown and ambiguous names are failures that say what to do."""
    assert (
        tools.get_attributes(target="dragon")["error"]
        == "nothing called 'dragon' is here; search with scope 'global' or use a dbref"
    )
    assert tools.get_attributes(target="#999")["error"] == "no object has the dbref '#999'"
    current().things["#22"].location = "#2"  # a second sword in the square
    assert (
        tools.get_attributes(target="sword")["error"]
        == "'sword' is ambiguous: rusty sword (#20), longsword (#22); use a dbref"
    )


def test_set_attribute_replaces_and_reports_the_previous_value() -> None:
    """Setting returns what was there; the new value is read back; a category is kept."""
    result = tools.set_attribute(target="me", attribute="mood", value="cheerful", category="state")
    assert result["previous"] == "curious"
    assert tools.get_attributes(target="me", names=["mood"])["attributes"] == {"mood": "cheerful"}
    assert current().me().attributes["mood"].category == "state"
    assert (
        tools.set_attribute(target="board", attribute="text", value="Gate fixed!")["previous"]
        == "Builders wanted for the north gate."
    )


def test_set_attribute_of_another_character_is_denied() -> None:
    """Players' characters are off limits."""
    assert tools.set_attribute(target="Aldric", attribute="mood", value="angry") == {
        "success": False,
        "error": "permission denied: only Aldric may change Aldric's attributes",
    }


# --- commands --------------------------------------------------------------------------------------


def test_commands_open_the_door_and_walk_through() -> None:
    """The north door blocks the way until opened; then the assistant moves and sees the new room."""
    assert tools.execute_command(command="north")["error"] == "the north door is closed"
    assert tools.execute_command(command="open north door") == {
        "command": "open north door",
        "output": "You open the north door.",
    }
    assert tools.execute_command(command="open door")["error"] == "the north door is already open"
    assert tools.execute_command(command="n")["output"] == "You go north to North Gate."
    assert tools.inspect_location(detail_level="brief")["location"]["name"] == "North Gate"


def test_commands_get_drop_inventory_and_look() -> None:
    """Picking up, dropping and looking work on portable things only."""
    assert tools.execute_command(command="get sword")["output"] == "You pick up the rusty sword."
    assert tools.execute_command(command="i")["output"] == "You carry: rusty sword, brass key"
    assert tools.execute_command(command="take board")["error"] == "the notice board cannot be picked up"
    assert tools.execute_command(command="drop key")["output"] == "You drop the brass key."
    assert tools.execute_command(command="look key")["output"] == "A small brass key."
    assert tools.execute_command(command="look")["output"].startswith("Town Square\n")


def test_unknown_command_lists_the_commands() -> None:
    """An unknown verb is a failure listing what works."""
    assert tools.execute_command(command="dance wildly")["error"] == (
        "unknown command 'dance'; commands: close, drop, get, go, inventory, look, open, or an exit's name"
    )


# --- talking ---------------------------------------------------------------------------------------


def test_pose_is_shown_to_the_room() -> None:
    """A pose is the character's name and the action, seen by everyone present."""
    assert tools.pose(action="waves cheerfully") == {"shown": "Sage waves cheerfully", "audience": ["Aldric"]}
    assert current().messages[-1].kind == "pose"


def test_page_delivery_depends_on_status_and_urgency() -> None:
    """Online players get pages; away ones when back unless urgent; offline ones on login."""
    assert tools.page(recipients=["aldric", "Mira", "Tobin"], message="Hello") == {
        "delivered": ["Aldric"],
        "held": ["Mira"],
        "offline": ["Tobin"],
    }
    urgent = tools.page(recipients=["Mira"], message="Fire!", urgent=True, reason="The smithy is burning.")
    assert urgent == {"delivered": ["Mira"]}


def test_page_failures() -> None:
    """Unknown players and urgent pages without a reason fail."""
    assert (
        tools.page(recipients=["Zed"], message="hi")["error"]
        == "no player named 'Zed'; players are Aldric, Mira, Tobin"
    )
    assert tools.page(recipients=["Mira"], message="hi", urgent=True)["error"] == "an urgent page needs a reason"
    assert current().messages == []


def test_whisper_needs_the_target_present() -> None:
    """Whispering works in the same room only."""
    assert tools.whisper(target="Aldric", message="The key is under the mat.") == {
        "to": "Aldric",
        "shown": 'You whisper to Aldric, "The key is under the mat."',
    }
    assert tools.whisper(target="Mira", message="psst")["error"] == "'Mira' is not here to whisper to; here: Aldric"


# --- memory and delegation ---------------------------------------------------------------------------


async def test_recall_by_query_ranks_by_overlap() -> None:
    """A query finds memories sharing its content words, best first."""
    found = await tools.recall_memories(query="what Mira ordered from the smithy")
    assert found["count"] == 1
    assert found["memories"][0]["id"] == "mem-0001"
    assert found["memories"][0]["relevance"] == 3


async def test_recall_by_tags_orders_by_importance() -> None:
    """Tags must all match; ties go to the more important, then the newer memory."""
    found = await tools.recall_memories(tags=["quest", "north-gate"], limit=3)
    assert [m["id"] for m in found["memories"]] == ["mem-0002", "mem-0004"]
    assert (await tools.recall_memories(tags=["quest"], limit=1))["count"] == 1
    assert (await tools.recall_memories(query="dragons"))["memories"] == []


async def test_store_then_recall_and_duplicates() -> None:
    """A stored memory can be recalled; storing the same content again returns the first id."""
    stored = await tools.store_memory(
        content="Tobin found a dragon egg in the library.", tags=["tobin", "egg", "egg"], importance="high"
    )
    assert stored == {"id": "mem-0005", "stored": True}
    assert current().memories[-1].tags == ("tobin", "egg")
    again = await tools.store_memory(content="Tobin found a dragon egg in the library.")
    assert again == {"id": "mem-0005", "stored": False, "duplicate": True}
    found = await tools.recall_memories(query="dragon egg")
    assert found["memories"][0]["id"] == "mem-0005"


async def test_delegated_task_advances_with_each_check() -> None:
    """queued, then running, then completed with the helper's result."""
    task = await tools.delegate_task(task="Copy the map.", agent="scribe", priority="high")
    assert task == {"task_id": "task-0001", "agent": "scribe", "status": "queued"}
    assert (await tools.get_delegation_status(task_id="task-0001"))["status"] == "running"
    done = await tools.get_delegation_status(task_id="task-0001")
    assert done == {
        "task_id": "task-0001",
        "agent": "scribe",
        "status": "completed",
        "result": "scribe finished: Copy the map.",
    }


async def test_delegation_failures() -> None:
    """Unknown agents and unknown task ids fail, naming what exists."""
    assert (await tools.delegate_task(task="x", agent="wizard"))[
        "error"
    ] == "agent must be one of builder, researcher, scribe, got 'wizard'"
    assert (await tools.get_delegation_status(task_id="task-ffff"))[
        "error"
    ] == "no delegated task 'task-ffff'; known tasks: task-7f3a"


async def test_go_to_sleep_sets_the_alarm() -> None:
    """Sleeping sets the wake-up time on the world's clock; sleeping again resets it."""
    assert await tools.go_to_sleep(duration=1800, reason="Nobody is online.") == {
        "asleep": True,
        "wake_at": "2025-12-06T12:30:00Z",
        "reason": "Nobody is online.",
    }
    assert (await tools.go_to_sleep())["wake_at"] == "2025-12-06T13:00:00Z"
    assert current().asleep_until == 3600


async def test_async_tools_checkpoint() -> None:
    """The async tools yield to trio, so a cancelled scope stops them before they act."""
    with trio.CancelScope() as scope:
        scope.cancel()
        await tools.store_memory(content="never stored")
    assert scope.cancelled_caught
    assert all(m.content != "never stored" for m in current().memories)


# --- the worker -------------------------------------------------------------------------------------


async def test_write_file_then_launch_experiment(workspace: Path) -> None:
    """The worker writes a script into the workspace, launches it and gets a pid and a log file."""
    assert await worker.write_file(path="experiments/lr_sweep.py", content="print('hello')\n") == {
        "path": "experiments/lr_sweep.py",
        "bytes": 15,
    }
    assert (workspace / "experiments" / "lr_sweep.py").read_text() == "print('hello')\n"
    launched = await worker.launch_experiment(script="experiments/lr_sweep.py", args=["--lr", "0.001"])
    assert launched == {"pid": 55555, "log_file": "logs/lr_sweep.log"}
    assert (
        workspace / "logs" / "lr_sweep.log"
    ).read_text() == "[2025-12-06T12:00:00Z] pid 55555: python experiments/lr_sweep.py --lr 0.001\n"
    resumed = await worker.launch_experiment(
        script="experiments/lr_sweep.py", resume=True, checkpoint="ckpt/step 10.pt"
    )
    assert resumed["pid"] == 55556
    assert current().experiments[-1].resumed_from == "ckpt/step 10.pt"
    assert "--resume 'ckpt/step 10.pt'" in (workspace / "logs" / "lr_sweep.log").read_text()


async def test_launch_needs_the_script_and_a_checkpoint_to_resume(workspace: Path) -> None:
    """A missing script, or resuming without a checkpoint, fails."""
    missing = await worker.launch_experiment(script="nope.py")
    assert missing == {"success": False, "error": "script 'nope.py' does not exist; write it with write_file first"}
    (workspace / "a.py").write_text("")
    assert (await worker.launch_experiment(script="a.py", resume=True))["error"] == "resuming needs a checkpoint"


@pytest.mark.parametrize("path", ["../outside.py", "a/../../outside.py", "/etc/passwd", "", "."])
async def test_paths_may_not_leave_the_workspace(path: str, workspace: Path) -> None:
    """Absolute paths, parent references and the workspace itself are refused."""
    result = await worker.write_file(path=path, content="x")
    assert result["success"] is False
    assert not (workspace.parent / "outside.py").exists()


async def test_symlink_out_of_the_workspace_is_refused(workspace: Path, tmp_path: Path) -> None:
    """A symbolic link pointing outside does not let a write escape."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (workspace / "link").symlink_to(outside)
    result = await worker.write_file(path="link/evil.py", content="x")
    assert result == {"success": False, "error": "path 'link/evil.py' leaves the workspace"}
    assert not (outside / "evil.py").exists()


async def test_list_directory_lists_sorted_names_with_directories_marked(workspace: Path) -> None:
    """Names come sorted; a directory's ends with '/'; '.' is the workspace itself; limit cuts and says so."""
    (workspace / "b.txt").write_text("")
    (workspace / "a").mkdir()
    (workspace / "a" / "x.py").write_text("")
    assert await worker.list_directory() == {"path": ".", "entries": ["a/", "b.txt"], "truncated": False}
    assert await worker.list_directory(path="a") == {"path": "a", "entries": ["x.py"], "truncated": False}
    assert await worker.list_directory(limit=1) == {"path": ".", "entries": ["a/"], "truncated": True}
    missing = await worker.list_directory(path="nope")
    assert missing == {"success": False, "error": "'nope' is not a directory of the workspace"}
    assert (await worker.list_directory(path="b.txt"))["success"] is False


async def test_list_directory_reads_a_bounded_number_of_entries(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A directory with more entries than MAX_SCANNED is read that far and reported as truncated."""
    monkeypatch.setattr(worker, "MAX_SCANNED", 5)
    for k in range(8):
        (workspace / f"f{k}").write_text("")
    listing = await worker.list_directory(limit=100)
    assert len(listing["entries"]) == 5
    assert listing["truncated"] is True


@pytest.mark.parametrize("path", ["/etc", "..", "../..", "a/../..", "out", "out/", "out/sub", "-la", "a\nb"])
async def test_list_directory_stays_in_the_workspace(path: str, workspace: Path, tmp_path: Path) -> None:
    """Absolute paths, '..' that climbs out, a symbolic link out, an option and a control character are refused.

    The spec's list_directory used to be `ls -1 -- {{ path }}`, which listed any directory.
    """
    outside = tmp_path / "outside"
    (outside / "sub").mkdir(parents=True)
    (outside / "SECRET").write_text("")
    (workspace / "a").mkdir()
    (workspace / "out").symlink_to(outside)
    result = await worker.list_directory(path=path)
    assert result["success"] is False, result
    assert "SECRET" not in str(result)


async def test_a_symbolic_link_in_a_listing_is_not_followed(workspace: Path, tmp_path: Path) -> None:
    """A link inside the workspace is listed by its name, without looking at what it points to."""
    (tmp_path / "elsewhere").mkdir()
    (workspace / "link").symlink_to(tmp_path / "elsewhere")
    assert (await worker.list_directory())["entries"] == ["link"]


async def test_a_checkpoint_outside_the_workspace_is_refused(workspace: Path) -> None:
    """Resuming from a checkpoint outside the workspace (or an option-like name) is refused."""
    (workspace / "run.py").write_text("")
    for checkpoint in ("/etc/shadow", "../ckpt.pt", "-rf"):
        result = await worker.launch_experiment(script="run.py", resume=True, checkpoint=checkpoint)
        assert result["success"] is False, checkpoint
        assert result["error"].startswith("checkpoint: path "), result
    assert current().experiments == []


@pytest.mark.parametrize("script", ["-c.py", "-cimport os;os.system('id')#.py"])
async def test_a_script_named_like_an_option_is_refused(script: str, workspace: Path) -> None:
    """`python -c...` would run the name as code: a script may not start with '-'."""
    (workspace / script).write_text("")
    result = await worker.launch_experiment(script=script)
    assert result["success"] is False
    assert "may not start with '-'" in result["error"]


async def test_script_arguments_cannot_forge_log_lines(workspace: Path) -> None:
    """An argument with a line break would write a fake line into the experiment's log: refused."""
    (workspace / "run.py").write_text("")
    forged = "x\n[2025-12-06T12:00:00Z] pid 1: rm -rf /"
    result = await worker.launch_experiment(script="run.py", args=[forged])
    assert result == {"success": False, "error": "script arguments may not hold control characters"}


async def test_workspace_of_the_world_wins_over_the_environment(tmp_path: Path) -> None:
    """``World.workspace`` set explicitly is used instead of ``$TOOLFLOW_WORKSPACE``."""
    mine = tmp_path / "mine"
    mine.mkdir()
    reset(World.demo()).workspace = mine
    await worker.write_file(path="f.txt", content="é")
    assert (mine / "f.txt").read_bytes() == "é".encode()


def test_reset_gives_a_fresh_world() -> None:
    """reset() replaces the current world with a new demo world, or with the one given."""
    tools.set_attribute(target="me", attribute="mood", value="grumpy")
    fresh = reset()
    assert current() is fresh
    assert fresh.me().attributes["mood"].value == "curious"
    mine = World()
    assert reset(mine) is mine
    assert current() is mine
