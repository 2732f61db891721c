"""The flush position the PostgreSQL reader reports, against psycopg2's own rule for moving it on a keepalive
(flushed >= dataStart of the last message): it never lets that rule confirm a transaction the target lacks."""
from cdc_assets.sources.postgres.feedback import Feedback


class Sent(list):
    def __call__(self, flush_lsn: int = 0, force: bool = False) -> None:
        self.append(flush_lsn)


def test_reads_freely_between_transactions_and_acknowledges_at_once():
    sent = Sent()
    feedback = Feedback(sent, start_lsn=100)
    feedback.received(200)  # Commit of a transaction ending at 200
    feedback.handing_out(200)
    feedback.received(300)  # ... and of one ending at 300, still in the queue
    feedback.handing_out(300)

    feedback.acknowledge(200)

    assert sent == [200] and feedback.may_read()  # the last message (300) lies past what was reported


def test_holds_back_inside_a_transaction_older_than_the_acknowledgement():
    sent = Sent()
    feedback = Feedback(sent, start_lsn=100)
    for end in (200, 300):
        feedback.received(end)
        feedback.handing_out(end)
    feedback.acknowledge(200)
    feedback.received(150)  # a change of a transaction that began before 200 and commits later

    assert not feedback.may_read()  # a keepalive now would be taken as flushed: 300 is not applied
    feedback.acknowledge(300)
    assert feedback.may_read() and sent == [200, 300]


def test_keeps_an_acknowledgement_back_until_the_stream_is_past_it():
    sent = Sent()
    feedback = Feedback(sent, start_lsn=100)
    for end in (200, 300):
        feedback.received(end)
        feedback.handing_out(end)
    feedback.received(250)  # a change of a transaction that began before 300

    feedback.acknowledge(280)

    assert sent == [] and feedback.may_read()  # sending 280 would make the next keepalive count as flushed
    feedback.received(310)  # the stream moved past it
    assert sent == [280]


def test_holds_back_after_a_relation_message_until_everything_is_acknowledged():
    sent = Sent()
    feedback = Feedback(sent, start_lsn=100)
    feedback.received(200)
    feedback.handing_out(200)
    feedback.received(0)  # a Relation message: dataStart 0, so psycopg2 takes any keepalive as flushed

    assert not feedback.may_read()
    feedback.acknowledge(200)
    assert feedback.may_read() and sent == [200]


def test_nothing_handed_out_and_unacknowledged_lets_psycopg2_move_on():
    sent = Sent()
    feedback = Feedback(sent, start_lsn=100)
    feedback.received(0)

    assert feedback.may_read()
