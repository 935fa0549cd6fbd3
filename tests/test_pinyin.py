"""Concept ids spell Chinese names in pinyin from a compact table (``memory/pinyin.py``) instead of pypinyin's
~55 MB of dictionaries: the ids must stay exactly those pypinyin gave, or a graph written before would get a
second node for every Chinese concept."""

from __future__ import annotations

import random

import pypinyin
from pypinyin.constants import PHRASES_DICT, PINYIN_DICT

from memory import ids, pinyin


def test_the_shipped_table_is_the_installed_pypinyins():
    assert pinyin.TABLE.read_text(encoding="utf-8") == pinyin.build(), "run: python -m memory.pinyin"


def _mixed_texts(n: int, seed: int = 7) -> list[str]:
    """What users name: phrases run together (where the longest match matters), single characters, prefixes of
    phrases, English, digits, punctuation, spaces, rare characters (CJK extension B, 〇), ü."""
    rnd = random.Random(seed)
    phrases, chars = sorted(PHRASES_DICT), [chr(code) for code in sorted(PINYIN_DICT)]
    other = ["a", "Hello ", " ", "，", "123", "ü", "〇", "\U00020001", "\U0002a6d6", "é", "・", "short answers "]
    texts = []
    for _ in range(n):
        parts = []
        for _ in range(rnd.randint(1, 6)):
            roll = rnd.random()
            if roll < 0.4:
                parts.append(rnd.choice(phrases))
            elif roll < 0.65:
                parts.append(rnd.choice(chars))
            elif roll < 0.8:
                parts.append(rnd.choice(phrases)[:rnd.randint(1, 3)])
            else:
                parts.append(rnd.choice(other))
        texts.append("".join(parts))
    return texts


def test_it_reads_every_text_as_pypinyin_does():
    texts = ["", "楞次定律", "长沙长大的长老", "I like 饺子 and 朝阳", "我女儿叫 Lü Mochi", "重庆重新", "银行行长"]
    texts += _mixed_texts(4000)
    wrong = [(t, pinyin.lazy_pinyin(t), pypinyin.lazy_pinyin(t)) for t in texts
             if pinyin.lazy_pinyin(t) != pypinyin.lazy_pinyin(t)]
    assert not wrong, wrong[:5]


def test_concept_ids_are_those_pypinyin_gave():
    before = {"楞次定律": "lengcidinglv_cf51dffb", "数学 Olympiad": "shuxue_olympiad_7805e323",  # pypinyin's
              "银行行长": "yinhanghangzhang_3ea2009d", "长沙长大的长老": "changshazhangdadezhangl_f2e1e6f5",
              "short answers": "short_answers_d82f7ed4", "3D 打印": "c_3d_dayin_1015782a"}
    assert {name: ids.concept_id("default", name) for name in before} == before
