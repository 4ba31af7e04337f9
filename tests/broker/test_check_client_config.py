"""CHECK_CLIENT_CONFIG 46 over the wire, as the Java client sends it before a SQL92 consumer starts
(MQClientInstance.checkClientInBroker): TAG subscriptions pass, SQL92 is parsed as the pull parses it and refused
with the pull's code and remark (SUBSCRIPTION_PARSE_FAILED, or SYSTEM_ERROR while enablePropertyFilter is off);
answers carry the version the Java client checks before it pulls with SQL92."""
from __future__ import annotations

import asyncio
import json

from broker_testkit import pull, send

from remoting import RemotingClient, RemotingCommand, RequestCode, ResponseCode
from remoting.remoting_command import SERVER_VERSION
from rmq_broker import Broker
from rmq_broker.broker_config import BrokerConfig


def check(kind: str, expression: str, topic: str = "T") -> RemotingCommand:
    # CheckClientRequestBody as fastjson writes it
    return RemotingCommand.request(RequestCode.CHECK_CLIENT_CONFIG, body=json.dumps({
        "clientId": "127.0.0.1@1", "group": "g", "subscriptionData": {
            "classFilterMode": False, "codeSet": [], "expressionType": kind, "subString": expression,
            "subVersion": 1700000000000, "tagsSet": [], "topic": topic}}).encode())


def test_check_client_config_refuses_what_the_pull_refuses(tmp_path):
    async def main():
        async with Broker(tmp_path / "on", "127.0.0.1:0") as on, \
                Broker(tmp_path / "off", "127.0.0.1:0", broker_config=BrokerConfig(enablePropertyFilter=False)) as off:
            async with RemotingClient(on.address) as c, RemotingClient(off.address) as c_off:
                for client in (c, c_off):
                    assert (await client.invoke(send("T", b"x"))).code == ResponseCode.SUCCESS
                for kind, expr in [("TAG", "a || b"), ("SQL92", "a > 5 AND region = 'eu'"), ("SQL92", "b IS NULL")]:
                    answer = await c.invoke(check(kind, expr))
                    assert answer.code == ResponseCode.SUCCESS, (kind, expr, answer.remark)
                    # the Java client pulls SQL92 only from a broker whose answers say 4.1.0 or newer
                    assert answer.version == SERVER_VERSION == 407
                # no subscription, or an empty body: nothing to check
                empty = RemotingCommand.request(RequestCode.CHECK_CLIENT_CONFIG, body=b'{"clientId": "x"}')
                assert (await c.invoke(empty)).code == ResponseCode.SUCCESS
                for expr in ["a >", "a = 'x", "", "a > 5 AND"]:
                    answer = await c.invoke(check("SQL92", expr))
                    assert answer.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED, (expr, answer.remark)
                    assert "parse the consumer's subscription failed" in answer.remark
                    if not expr:  # a pull's empty subscription means "*"
                        continue
                    # the pull with the same subscription is refused the same way
                    pulled = await c.invoke(pull("T", 0, expr, "SQL92"))
                    assert (pulled.code, pulled.remark) == (answer.code, answer.remark)
                unknown = await c.invoke(check("REGEX", "a.*"))
                assert unknown.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED and "REGEX" in unknown.remark
                # types as written, as a stock broker matches them (its FilterFactory has no "sql92")
                for kind, expr in [("sql92", "a > 5"), ("tag", "a || b"), ("Sql92", "a > 5")]:
                    answer = await c.invoke(check(kind, expr))
                    assert answer.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED, (kind, answer.remark)
                    assert f"expressionType '{kind}' is not supported" in answer.remark
                    pulled = await c.invoke(pull("T", 0, expr, kind))
                    assert (pulled.code, pulled.remark) == (answer.code, answer.remark)
                bad = await c.invoke(RemotingCommand.request(RequestCode.CHECK_CLIENT_CONFIG, body=b"{nope"))
                assert bad.code == ResponseCode.SYSTEM_ERROR and "not JSON" in bad.remark
                # enablePropertyFilter=false: SQL92 refused with RocketMQ's remark, TAG still fine
                refused = await c_off.invoke(check("SQL92", "a > 5"))
                assert refused.code == ResponseCode.SYSTEM_ERROR
                assert refused.remark.startswith("The broker does not support consumer to filter message by SQL92")
                pulled = await c_off.invoke(pull("T", 0, "a > 5", "SQL92"))
                assert (pulled.code, pulled.remark) == (refused.code, refused.remark)
                assert (await c_off.invoke(check("TAG", "*"))).code == ResponseCode.SUCCESS
    asyncio.run(main())
