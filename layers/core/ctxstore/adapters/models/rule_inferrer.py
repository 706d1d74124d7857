"""Offline preference and fact inference for memories (infer=true), by first-person sentence patterns.

Only what the user says counts: in a conversation, lines spoken by the
assistant are skipped. Each matching sentence is rewritten in the third
person ("I love hiking" -> "Sam loves hiking") so it stands alone in search.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
_SPEAKER = re.compile(r"^\s*([A-Za-z][\w .'-]{0,40}):\s*(.*)$")

# First-person statements worth remembering: preferences, identity, circumstances, plans, habits.
_PATTERNS = [
    r"\bI(?:'m| am)? (?:really |truly |absolutely )?(?:like|love|enjoy|prefer|adore|hate|dislike|detest)\b",
    r"\bI can(?:'t|not) stand\b",
    r"\bmy (?:favou?rite|least favou?rite)\b",
    r"\bI(?:'m| am) (?:a|an|the)\b",
    r"\bI(?:'m| am) (?:allergic|vegetarian|vegan|married|single|divorced|pregnant|retired|from|based in|"
    r"learning|training|studying|working|planning|trying|saving|afraid|scared|interested|into)\b",
    r"\bI (?:work|live|grew up|moved|study|studied|teach|play|collect|own|have|had|use|drive|speak|volunteer|"
    r"started|quit|joined|adopted|bought|visited|go|went|run|ran|cook|paint|write|wrote|read|watch)\b",
    r"\bI(?:'ve| have) (?:been|got|never|always|a|an|two|three)\b",
    r"\bI (?:usually|always|never|often|rarely|sometimes) \w+",
    r"\bI (?:want|wanted|plan|hope|need|would like|wish|decided|intend) to\b",
    r"\bmy (?:name|wife|husband|partner|son|daughter|kids?|children|mom|mother|dad|father|brother|sister|"
    r"dog|cat|pet|job|boss|birthday|hometown|goal|dream|hobby|hobbies)\b",
]
_MATCH = re.compile("|".join(_PATTERNS), re.IGNORECASE)
_QUESTION = re.compile(r"\?\s*$")

_THIRD_PERSON = {
    "like": "likes",
    "love": "loves",
    "enjoy": "enjoys",
    "prefer": "prefers",
    "adore": "adores",
    "hate": "hates",
    "dislike": "dislikes",
    "detest": "detests",
    "work": "works",
    "live": "lives",
    "study": "studies",
    "teach": "teaches",
    "play": "plays",
    "collect": "collects",
    "own": "owns",
    "have": "has",
    "use": "uses",
    "drive": "drives",
    "speak": "speaks",
    "volunteer": "volunteers",
    "go": "goes",
    "run": "runs",
    "cook": "cooks",
    "paint": "paints",
    "write": "writes",
    "read": "reads",
    "watch": "watches",
    "want": "wants",
    "plan": "plans",
    "hope": "hopes",
    "need": "needs",
    "wish": "wishes",
    "intend": "intends",
    "usually": "usually",
    "always": "always",
    "never": "never",
    "often": "often",
    "rarely": "rarely",
    "sometimes": "sometimes",
    "can't": "can't",
    "cannot": "cannot",
    "would": "would",
}


def _third_person(sentence: str, name: str) -> str:
    s = re.sub(r"\bI'm\b|\bI am\b", f"{name} is", sentence)
    s = re.sub(r"\bI've\b", f"{name} has", s)
    s = re.sub(r"\bI'd\b", f"{name} would", s)
    s = re.sub(r"\bI'll\b", f"{name} will", s)

    def verb(m: re.Match[str]) -> str:
        word = m.group(1)
        return f"{name} {_THIRD_PERSON.get(word.lower(), word)}"

    s = re.sub(r"\bI (\w+(?:'t)?)", verb, s)
    s = re.sub(r"\bI\b", name, s)
    s = re.sub(r"\b[Mm]y\b", f"{name}'s", s)
    s = re.sub(r"\bmine\b", f"{name}'s", s)
    s = re.sub(r"\bme\b", name, s)
    s = re.sub(r"\bmyself\b", name, s)
    s = s.strip()
    return s if s.endswith((".", "!")) else s + "."


class RuleInferrer:
    def infer_memories(self, texts: Sequence[str], user_name: str | None = None) -> list[str]:
        name = user_name or "The user"
        out: list[str] = []
        seen: set[str] = set()
        for text in texts:
            for line in text.splitlines():
                m = _SPEAKER.match(line)
                if m and m.group(1).strip().lower() in ("assistant", "ai", "bot", "system"):
                    continue  # only the user's own words are evidence of the user's preferences
                body = m.group(2) if m else line
                for sentence in _SENTENCE.split(body):
                    sentence = sentence.strip()
                    if len(sentence) < 8 or _QUESTION.search(sentence) or not _MATCH.search(sentence):
                        continue
                    fact = _third_person(sentence, name)
                    key = fact.lower()
                    if key not in seen:
                        seen.add(key)
                        out.append(fact)
        return out
