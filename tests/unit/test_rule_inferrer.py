from __future__ import annotations

from ctxstore.adapters.models.rule_inferrer import RuleInferrer


def test_user_statements_become_third_person_facts() -> None:
    facts = RuleInferrer().infer_memories(
        [
            "User: I love hiking in the Alps. What should I pack?\nAssistant: I like boots.\n"
            "User: My favorite food is sushi. I'm allergic to peanuts. The weather is nice."
        ],
        "Sam",
    )
    assert facts == ["Sam loves hiking in the Alps.", "Sam's favorite food is sushi.", "Sam is allergic to peanuts."]


def test_assistant_lines_questions_and_chatter_are_ignored() -> None:
    facts = RuleInferrer().infer_memories(["Assistant: I prefer tea.\nUser: Do I like tea?\nUser: It rained."])
    assert facts == []


def test_plain_text_and_default_name() -> None:
    facts = RuleInferrer().infer_memories(["I work as a nurse in Lyon. I usually cycle to work."])
    assert facts[0] == "The user works as a nurse in Lyon."
    assert len(facts) == 2
