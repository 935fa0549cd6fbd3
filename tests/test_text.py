from memory.text import FULL_TEXT_MARKER, clean, cut, keywords, tokenize, truncate_reply


def test_clean_folds_spaces_keeps_newlines_and_strips():
    assert clean("  你好 \t\t 世界  \n\n  第二行\u3000\u3000end  ") == "你好 世界\n\n第二行 end"


def test_clean_escapes_html_so_it_renders_as_text():
    stored = clean('<script>alert("x")</script> <b onclick=run()>hi</b> a<b & c')
    assert "<" not in stored and ">" not in stored
    assert stored.startswith("&lt;script&gt;") and "a&lt;b &amp; c" in stored


def test_clean_drops_control_characters_and_normalises_line_endings():
    assert clean("a\x00b\r\nc\u200bd\re") == "ab\ncd\ne"


def test_cut_never_splits_an_entity():
    text = clean("x" * 45 + "<<<<<")
    out = cut(text, 50)
    assert len(out) <= 50 and out.endswith("…") and "&l…" not in out and "&…" not in out


def test_long_reply_is_cut_with_marker():
    short, was_cut = truncate_reply("短" * 500, 500)
    assert not was_cut and short == "短" * 500
    long_, was_cut = truncate_reply("长" * 501, 500)
    assert was_cut and long_.endswith("…" + FULL_TEXT_MARKER) and long_.startswith("长" * 499)


def test_tokenize_chinese_words_and_english_words():
    words = ["总", "加速", "速度", "加速度", "速度", "搞混", "velocity"]
    assert tokenize("我总把加速度和速度搞混 and Velocity!") == words
    assert tokenize("加速度 and Velocity!", "bigram") == ["加速", "速度", "velocity"]


def test_keywords_prefer_rule_slots_then_content():
    assert keywords(tokenize("我总把加速度和速度搞混"), ["加速度", "速度"])[:2] == ["加速度", "速度"]
    assert len(keywords(tokenize("I really enjoy learning quantum physics with videos"), [])) == 3
