"""What the source decides about the log's read failures (rmq_log.ReadPolicy): lost messages go through
failOnDataLoss (data_loss.report_data_loss), and a broker's refusal of a setting names the option to fix (the
sink's ACL refusals too: refused_by_acl)."""
from __future__ import annotations

from typing import Callable, Union

from rmq_log import places
from rmq_log.broker_calls import refused_by_acl as _refused_by_acl
from rmq_log.writes import WriteRefused

from .data_loss import report_data_loss
from .errors import DataLossError, RmqOptionError


class SourceReadPolicy:
    """Stateless, so every range reader pickles it by its class."""

    def report_data_loss(self, text: str, fail: bool, instead: str, then: Union[str, Callable[[], str]]) -> None:
        report_data_loss(text, fail, instead, then)

    def lost(self, text: str) -> Exception:
        return DataLossError(text)

    def setting_error(self, setting: str, text: str) -> Exception:
        return RmqOptionError(places.option_of(setting) or setting, text)


POLICY = SourceReadPolicy()


def refused_by_acl(refused: WriteRefused) -> Exception:
    """A broker's refusal of the sink's writes: an ACL refusal as the error of accessKey or secretKey, a broker
    given as a name server as namesrvAddr's; any other as the client's error."""
    return _refused_by_acl(refused.cause, refused.what, POLICY)
