"""The MessageFilter facade: tag selectors, combination, consume-queue
pruning, normalised text and pickling."""

import pickle

import numpy as np
import pytest
from filters_testkit import decide_all

from filters import MessageFilter, tags_hash_code

MESSAGES = [
    {"TAGS": "TagA"},
    {"TAGS": "TagB"},
    {"TAGS": "TagC"},
    {"TAGS": "TagA||TagB"},
    {"TAGS": "Aa"},
    {"TAGS": "BB"},
    {},
    {"TAGS": ""},
    {"TAGS": " TagA"},
]


def delivered(f):
    return [m.get("TAGS") for m, ok in zip(MESSAGES, decide_all(f, MESSAGES)) if ok]


@pytest.mark.parametrize("selector", ["*", "", None, "  "])
def test_match_all_tag_selectors(selector):
    f = MessageFilter.by_tags(selector)
    assert delivered(f) == [m.get("TAGS") for m in MESSAGES]
    assert f.is_matched_by_consume_queue(0) and f.is_matched_by_consume_queue(12345)
    assert str(f) == "*"


def test_tag_selector_trims_and_drops_empties():
    f = MessageFilter.by_tags(" TagA ||  || TagC||")
    assert str(f) == "TagA || TagC"
    assert delivered(f) == ["TagA", "TagC"]


def test_tag_selector_needs_whole_tag_text():
    assert delivered(MessageFilter.by_tags("TagA")) == ["TagA"]
    assert delivered(MessageFilter.by_tags("TagA||TagB")) == ["TagA", "TagB"]


def test_untagged_message_does_not_match_a_tag_selector():
    f = MessageFilter.by_tags("TagA")
    assert not f.is_matched_by_commit_log({})
    assert not f.is_matched_by_commit_log(None)
    assert not f.is_matched_by_consume_queue(0)


def test_hash_collision_is_caught_on_the_record():
    f = MessageFilter.by_tags("Aa")
    assert tags_hash_code("Aa") == tags_hash_code("BB") == 2112
    assert f.is_matched_by_consume_queue(tags_hash_code("BB"))  # the queue cannot tell them apart
    assert delivered(f) == ["Aa"]  # the exact check can


def test_only_separators_matches_nothing():
    f = MessageFilter.by_tags("||")
    assert delivered(f) == []
    assert not f.is_matched_by_consume_queue(tags_hash_code("TagA"))


def test_consume_queue_mask_agrees_with_scalar_check():
    rng = np.random.default_rng(7)
    tags = ["TagA", "TagB", "TagC", "Aa", "BB", None, ""] + [f"T{i}" for i in range(30)]
    codes = np.array([tags_hash_code(t) for t in tags] + list(rng.integers(-(2**31), 2**31, 100)), dtype=np.int64)
    for f in [
        MessageFilter.by_tags("TagA || TagC"),
        MessageFilter.by_tags(" || ".join(f"T{i}" for i in range(20))),  # a large set
        MessageFilter.by_sql("TAGS = 'TagB' OR TAGS IN ('Aa')"),
        MessageFilter.by_sql("a > 1"),
        MessageFilter.by_sql("FALSE"),
    ]:
        mask = f.consume_queue_mask(codes)
        assert mask.dtype == bool
        assert mask.tolist() == [f.is_matched_by_consume_queue(int(c)) for c in codes]


@pytest.mark.parametrize(
    "selector, passes, blocked",
    [
        ("TAGS IN ('TagA', 'TagB')", ["TagA", "TagB"], ["TagC", None]),
        ("TAGS = 'TagA' AND a > 1", ["TagA"], ["TagB"]),
        ("'TagA' = TAGS OR TAGS = 'TagC'", ["TagA", "TagC"], ["TagB"]),
        ("TAGS IN ('TagA', 'TagB') AND TAGS IN ('TagB', 'TagC')", ["TagB"], ["TagA", "TagC"]),
        ("TAGS = 'TagA' OR a > 1", ["TagA", "TagZ", None], []),  # the OR side could match any tag
        ("TAGS NOT IN ('TagA')", ["TagA", "TagB"], []),
        ("NOT (TAGS = 'TagA')", ["TagA", "TagB"], []),
        ("TAGS <> 'TagA'", ["TagA", "TagB"], []),
    ],
)
def test_sql_selectors_prune_by_tag_codes(selector, passes, blocked):
    f = MessageFilter.by_sql(selector)
    for tag in passes:
        assert f.is_matched_by_consume_queue(tags_hash_code(tag)), tag
    for tag in blocked:
        assert not f.is_matched_by_consume_queue(tags_hash_code(tag)), tag


def test_both_tag_and_sql_must_hold():
    f = MessageFilter.both(MessageFilter.by_tags("TagA || TagB"), MessageFilter.by_sql("a > 1"))
    g = MessageFilter.by_tags("TagA || TagB") & MessageFilter.by_sql("a > 1")
    assert f == g
    messages = [{"TAGS": "TagA", "a": "2"}, {"TAGS": "TagA", "a": "1"}, {"TAGS": "TagC", "a": "5"}]
    assert decide_all(f, messages) == [True, False, False]
    assert not f.is_matched_by_consume_queue(tags_hash_code("TagC"))
    assert str(f) == "(TagA || TagB) AND (a > 1)"
    assert MessageFilter.both(None, f) is f
    assert MessageFilter.both(MessageFilter.all(), f) is f


def test_all_matches_everything():
    f = MessageFilter.all()
    assert decide_all(f, [{}, {"a": "x"}]) == [True, True]
    assert f.consume_queue_mask(np.array([0, 5], dtype=np.int64)).tolist() == [True, True]


@pytest.mark.parametrize(
    "f",
    [
        MessageFilter.by_tags("TagA || TagB"),
        MessageFilter.by_sql("(TAGS is not null and TAGS in ('TagA', 'TagB')) and "
                             "(a is not null and a between 0 and 3)"),
        MessageFilter.by_tags("TagA") & MessageFilter.by_sql("NOT (b CONTAINS 'x') OR c = -1.5"),
        MessageFilter.all(),
    ],
)
def test_pickles_and_keeps_deciding(f):
    f.is_matched_by_commit_log({"a": "1"})  # builds the cached evaluators first
    g = pickle.loads(pickle.dumps(f))
    assert g == f and str(g) == str(f)
    messages = [{"TAGS": "TagA", "a": "1"}, {"TAGS": "TagB", "a": "9", "b": "x"}, {"c": "-1.5"}]
    assert decide_all(g, messages) == decide_all(f, messages)


@pytest.mark.parametrize(
    "selector, text",
    [
        ("tags   in ('a','b')", "tags IN ('a', 'b')"),
        ("a between 0 and 3 and not b", "a BETWEEN 0 AND 3 AND NOT b"),
        ("a = 'it''s'", "a = 'it''s'"),
        ("(a = 1 or b = 2) and c is not null", "(a = 1 OR b = 2) AND c IS NOT NULL"),
        ("NOT a = 1", "(NOT a) = 1"),
        ("a > -5 /* c */", "a > -5"),
        ("a = 5l", "a = 5"),
        ("x NOT startswith 'p'", "x NOT STARTSWITH 'p'"),
    ],
)
def test_normalised_text(selector, text):
    f = MessageFilter.by_sql(selector)
    assert str(f) == text
    assert MessageFilter.by_sql(text) == f


def test_the_store_interface_never_raises_on_odd_properties():
    f = MessageFilter.by_sql("a > 1 AND b = 2.5")
    assert f.is_matched_by_commit_log({"a": "x", "b": "y"}) is False
    assert f.is_matched_by_commit_log({}) is False
    assert f.is_matched_by_commit_log({"a": "2", "b": "2.5"}) is True
