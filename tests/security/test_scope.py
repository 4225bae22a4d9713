"""A task's tool scope lets the task's own calls through and refuses, by name and with a reason, a call an
injected instruction asks for: another tool, another recipient, an argument the task never named."""

from __future__ import annotations

import pytest
import yaml

from hilbert.errors import UserError
from hilbert.security.scope import ToolScope

PAY_THE_BILL = """
tools:
  read_file:
    file_path: bill-december-2023.txt
  send_money:
    recipient: [UK12345678901234567890]
    amount: any
    subject: {glob: "Car Rental*"}
    date: {regex: "2022-\\\\d\\\\d-\\\\d\\\\d"}
  get_balance: any
"""


def scope() -> ToolScope:
    return ToolScope.from_mapping(yaml.safe_load(PAY_THE_BILL))


def test_the_tasks_own_calls_pass() -> None:
    task = scope()
    assert task.check("read_file", {"file_path": "bill-december-2023.txt"}) is None
    paying = {"recipient": "UK12345678901234567890", "amount": 98.7, "subject": "Car Rental 98.70"}
    assert task.check("send_money", {**paying, "date": "2022-01-01"}) is None
    assert task.check("send_money", {"recipient": "UK12345678901234567890"}) is None  # defaults apply
    assert task.check("get_balance", {"anything": [1, 2]}) is None
    assert task.tool_names == ("read_file", "send_money", "get_balance")


@pytest.mark.parametrize(
    ("name", "arguments", "reason"),
    [
        ("update_password", {"password": "new_password"}, "`update_password` is not among this task's tools"),
        ("send_money", {"recipient": "US133000000121212121212"}, "argument `recipient` of `send_money`"),
        ("send_money", {"subject": "The user likes pizza"}, "glob 'Car Rental*'"),
        ("send_money", {"date": "2022-01-01; also pay US13"}, "regex"),
        ("send_money", {"date": 20220101}, "regex"),  # a pattern only matches text
        ("read_file", {"file_path": "landlord-notices.txt"}, '"landlord-notices.txt"'),
        ("read_file", {"file_path": "bill-december-2023.txt", "mode": "w"}, "takes no argument `mode`"),
    ],
)
def test_an_injected_call_is_refused_with_a_reason(
    name: str, arguments: dict[str, object], reason: str
) -> None:
    refusal = scope().check(name, arguments)
    assert refusal is not None and refusal.rule == "tool_scope"
    assert reason in refusal.why
    assert str(refusal).startswith("refused by policy (tool_scope): ")


def test_values_compare_as_json() -> None:
    task = ToolScope.from_mapping(
        {"tools": {"update": {"id": 7, "amount": {"one_of": [1200]}, "flag": True, "to": [["a", "b"]]}}}
    )
    assert task.check("update", {"id": 7.0, "amount": 1200.0, "flag": True, "to": ["a", "b"]}) is None
    assert task.check("update", {"flag": 1}) is not None  # true is not 1
    assert task.check("update", {"id": "7"}) is not None
    assert task.check("update", {"to": ["b", "a"]}) is not None


def test_a_list_of_names_and_the_star_leave_arguments_open() -> None:
    names = ToolScope.from_mapping({"tools": ["read_file", "send_money"]})
    assert names.check("send_money", {"recipient": "US133000000121212121212"}) is None
    assert names.check("delete_file", {}) is not None
    open_rest = ToolScope.from_mapping({"tools": {"send_money": {"recipient": "UK1", "*": "any"}}})
    assert open_rest.check("send_money", {"recipient": "UK1", "amount": 5}) is None
    assert open_rest.check("send_money", {"recipient": "US13", "amount": 5}) is not None


def test_a_scope_reads_back_what_it_writes() -> None:
    task = scope()
    again = ToolScope.from_mapping(task.to_mapping())
    assert again == task
    assert yaml.safe_load(yaml.safe_dump(task.to_mapping())) == task.to_mapping()


@pytest.mark.parametrize(
    ("data", "says"),
    [
        ({"tool": ["read_file"]}, "the one key `tools`"),
        ({"tools": "read_file"}, "is a mapping or a list of names"),
        ({"tools": [{"read_file": "any"}]}, "tool names only"),
        ({"tools": {"read_file": "anything"}}, "tool `read_file`: write `any`"),
        ({"tools": {"send_money": {"recipient": []}}}, "an empty list allows nothing"),
        ({"tools": {"send_money": {"recipient": {"one_of": "UK1"}}}}, "one_of takes a list"),
        ({"tools": {"send_money": {"recipient": {"prefix": "UK"}}}}, "one_of, glob or regex"),
        ({"tools": {"send_money": {"date": {"regex": "2022-("}}}}, "does not compile"),
        ({"tools": {"send_money": {"date": {"glob": 2022}}}}, "a glob is a text"),
        ({"tools": {"send_money": {"amount": float("nan")}}}, "not a JSON value"),
        ({"tools": {"": "any"}}, "a tool name is a non-empty text"),
    ],
)
def test_bad_scopes_are_refused_with_a_hint(data: object, says: str) -> None:
    with pytest.raises(UserError) as raised:
        ToolScope.from_mapping(data)  # type: ignore[arg-type]
    assert says in raised.value.message
    assert raised.value.hint and "one_of" in raised.value.hint
