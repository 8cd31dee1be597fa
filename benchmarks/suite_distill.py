"""Serving a distilled program: what a Router adds to the plain program call.

The program is the ticket example's accepted reply, compiled. Rows: the plain compiled
call (dict in, dict out: the baseline), a router call the program claims, and a router
call it abstains on, answered by a constant fallback and recorded (the escalation path).
"""

from __future__ import annotations

from benchmarks.harness import Row, median_time


def run(quick: bool) -> list[Row]:
    import numpy as np

    from tensorcode import algorithm
    from tensorcode.distill import distill, tickets
    from tensorcode.integrations import RecordedModel, load_replies

    replies = load_replies(tickets.replies_path())
    source, parameters = algorithm.parse_reply(replies[-1])
    program = algorithm.compile(source, inputs={"features": (12,)},
                                outputs={"route": (), "covered": ()}, parameters=parameters)
    cases = tickets.generate(40, 1)
    workload = [{"features": tickets.features(t.text)} for t in cases]
    targets = [{"route": tickets.teacher(t.text)} for t in cases]
    result = distill(tickets.TASK, {"features": (12,)}, workload, targets=targets,
                     author=RecordedModel([replies[-1]]), attempts=1)
    claimed = {"features": np.eye(12)[4]}
    abstained = {"features": np.zeros(12)}
    router = result.router(lambda inputs: {"route": 0.0})
    repeat, number = (15, 200) if quick else (50, 1000)

    def measure(fn) -> float:
        return median_time(fn, repeat=repeat, warmup=20, number=number) * 1e6

    plain = measure(lambda: program(claimed))
    through_claimed = measure(lambda: router(claimed))
    through_escalated = measure(lambda: router(abstained))
    workload_name = "ticket router, one call"
    return [
        Row("distill", workload_name, "tensorcode", plain, "us", baseline=True,
            note="compiled Algorithm call, dict in/out"),
        Row("distill", workload_name, "router (claimed)", through_claimed, "us",
            note="Router: program answers"),
        Row("distill", workload_name, "router (escalated)", through_escalated, "us",
            note="Router: program abstains, fallback answers, case recorded"),
    ]
