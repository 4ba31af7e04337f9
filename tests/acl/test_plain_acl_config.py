"""What plain_acl.yml may say (RocketMQ's white-list forms, permissions, account keys) and how a bad file is refused
naming the place at fault, never a secret; credentials that never show their secret, in a repr or a pickle."""
from __future__ import annotations

import pickle

import pytest

from remoting import RemotingCommand, RequestCode
from rmq_acl import AclException, SessionCredentials
from rmq_acl.plain_access_resource import parse
from rmq_acl.plain_permission_manager import parse_rules
from rmq_acl.remote_address_strategy import remote_address_strategy


@pytest.mark.parametrize("form, host, matches", [
    ("*", "10.1.2.3", True), ("*.*.*.*", "::1", True), ("", "127.0.0.1", False),
    ("192.168.0.1", "192.168.0.1", True), ("192.168.0.1", "192.168.0.2", False),
    ("192.168.0.*", "192.168.0.77", True), ("192.168.0.*", "192.168.1.77", False),
    ("192.168.1.1,192.168.1.2", "192.168.1.2", True), ("192.168.1.1,192.168.1.2", "192.168.1.3", False),
    ("192.168.1.{1,2,3}", "192.168.1.3", True), ("192.168.1.{1,2,3}", "192.168.1.4", False),
    ("192.168.0.1-200", "192.168.0.200", True), ("192.168.0.1-200", "192.168.0.201", False),
    ("192.168.1-10.*", "192.168.10.9", True), ("192.168.*.*", "192.169.0.1", False),
    ("::1", "0:0:0:0:0:0:0:1", True), ("2001:db8::*", "2001:db8::42", True), ("2001:db8::*", "2001:db9::42", False),
    ("2001:db8::1:1-ff", "2001:db8::1:a0", True), ("2001:db8::{1,2}", "2001:db8::2", True),
])
def test_white_address_forms_match_as_rocketmq_matches_them(form, host, matches):
    assert remote_address_strategy(form)(host) is matches


@pytest.mark.parametrize("form", ["300.1.1.1", "1.2.3", "192.168.0.300-400", "localhost", "192.*", "1-2.3.4.5"])
def test_a_white_address_that_is_no_form_is_refused_naming_it(form):
    with pytest.raises(AclException, match="white address"):
        remote_address_strategy(form)


GOOD = """
accounts:
- accessKey: RocketMQ
  secretKey: "12345678"
  admin: false
  defaultTopicPerm: DENY
  defaultGroupPerm: SUB
  topicPerms: [topicA=DENY, topicB=PUB|SUB, topicC=SUB]
  groupPerms: [groupA=DENY, groupB=PUB|SUB]
"""


@pytest.mark.parametrize("text, words", [
    (GOOD.replace("topicC=SUB", "topicC=READ"), "account 'RocketMQ'.topicPerms topicC: 'READ' is not a permission"),
    (GOOD.replace("groupA=DENY", "groupA"), "account 'RocketMQ'.groupPerms: 'groupA' is not name=PERM"),
    (GOOD.replace("defaultGroupPerm: SUB", "defaultGroupPerm: ALL"), "defaultGroupPerm: 'ALL' is not a permission"),
    (GOOD.replace("accessKey: RocketMQ", "accessKey: short"), "accounts[0].accessKey: missing or not longer than 6"),
    (GOOD.replace('"12345678"', '"123"'), "account 'RocketMQ': secretKey missing or not longer than 6"),
    (GOOD.replace("admin: false", "admin: maybe"), "account 'RocketMQ'.admin: 'maybe' is not true or false"),
    (GOOD + GOOD.replace("accounts:\n", ""), "accounts[1]: accessKey 'RocketMQ' is given twice"),
    ("globalWhiteRemoteAddresses: [10.10.*]\n", "white address '10.10.*'"),
    ("accounts: [", "is not YAML"),
    ("- just a list\n", "expected globalWhiteRemoteAddresses and accounts keys"),
])
def test_a_bad_plain_acl_yml_is_refused_naming_the_place_never_the_secret(text, words):
    with pytest.raises(AclException) as e:
        parse_rules(text.encode(), "/etc/plain_acl.yml")
    assert str(e.value).startswith("/etc/plain_acl.yml") and words in str(e.value) and "12345678" not in str(e.value)


def test_rocketmqs_example_file_loads():
    rules = parse_rules(b"""
globalWhiteRemoteAddresses:
- 10.10.103.*
- 192.168.0.*
accounts:
- accessKey: RocketMQ
  secretKey: 12345678
  whiteRemoteAddress:
  admin: false
  defaultTopicPerm: DENY
  defaultGroupPerm: SUB
  topicPerms:
  - topicA=DENY
  - topicB=PUB|SUB
  - topicC=SUB
  groupPerms:
  - groupA=DENY
  - groupB=PUB|SUB
  - groupC=SUB
- accessKey: rocketmq2
  secretKey: 12345678
  whiteRemoteAddress: 192.168.1.*
  admin: true
""", "plain_acl.yml")
    assert sorted(rules.accounts) == ["RocketMQ", "rocketmq2"] and len(rules.global_white) == 2
    assert rules.accounts["RocketMQ"].secret_key == "12345678"  # a number in YAML is the text of the key
    assert rules.accounts["rocketmq2"].admin and rules.accounts["rocketmq2"].white("192.168.1.9")
    assert "%RETRY%groupC" in (rules.accounts["RocketMQ"].perms or {})  # a group is its retry topic
    assert "12345678" not in repr(rules)


@pytest.mark.parametrize("remote, host", [("127.0.0.1:5555", "127.0.0.1"), ("::1:5555", "::1"),
                                          ("[::1]:5555", "::1"), ("::ffff:10.0.0.7:5555", "10.0.0.7")])
def test_the_client_address_is_matched_without_its_port_and_an_ipv4_client_of_a_dual_stack_socket_as_ipv4(remote,
                                                                                                       host):
    assert parse(RemotingCommand.request(RequestCode.GET_MAX_OFFSET, {"topic": "T"}), remote).host == host


def test_credentials_never_show_the_secret_and_a_secret_from_the_environment_is_not_pickled(monkeypatch):
    given = SessionCredentials("RocketMQ", "given-secret")
    assert "given-secret" not in repr(given) + str(given)
    assert pickle.loads(pickle.dumps(given)).secret_key == "given-secret"  # an option's secret travels, like Spark's
    monkeypatch.setenv("RMQ_ACCESS_KEY", "RocketMQ")
    monkeypatch.setenv("RMQ_SECRET_KEY", "env-secret")
    from_env = SessionCredentials.resolve(None, None)
    assert from_env is not None and from_env.secret_key == "env-secret"
    data = pickle.dumps(from_env)
    assert b"env-secret" not in data
    monkeypatch.setenv("RMQ_SECRET_KEY", "the-executors-secret")
    assert pickle.loads(data).secret_key == "the-executors-secret"
    monkeypatch.delenv("RMQ_SECRET_KEY")
    with pytest.raises(ValueError, match="RMQ_SECRET_KEY is not set in this process"):
        pickle.loads(data)
    with pytest.raises(ValueError, match="secretKey: none given for accessKey 'RocketMQ'"):
        SessionCredentials.resolve(None, None)
