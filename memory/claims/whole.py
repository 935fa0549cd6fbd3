"""What is read on the whole message rather than clause by clause: wishes about answers (question-shaped or
not: "Could you keep your replies concise?"), confusions ("我总把加速度和速度搞混，怎么办？") and shown mastery."""

from __future__ import annotations

import re

_EN_ANSWERS = r"(?:answers?|responses?|repl(?:y|ies)|explanations?)"
#: (pattern, the wish it states; "" — its first group); "the short answer is no" / "简短回答：不行" is a short
#: answer, not a wish
SHORT_ANSWERS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"(?:回答|解释|回复|讲解)(?:能|可以|请)?(?:更|再|尽量)?"
                r"(简短|简洁|短|详细|具体|慢)(?:一点|一些|些)?"), ""),
    (re.compile(r"(?:(?:简短|简洁|精简|简要)(?:一点|一些|点|些)?地?(?:回答|回复|作答|解释)|"
                r"简单(?:一点|一些|点|些)?地?(?:回答|回复|作答))(?!\s*(?:[:：]|是|就是))|"
                r"(?:说|讲|回答|回复)得?(?:简短|简洁|短)(?:一点|一些|点|些)|"
                r"^\s*(?:请|麻烦)?你?(?:简短|简洁|精简)(?:一点|一些|点|些)\s*[!！。.~]*$"), "简短"),
    (re.compile(r"(?:别|不要|不用|无需|不需要)(?:(?:给我|跟我|和我|对我)(?:讲|说|回答|回复|解释|答)?|讲|说|回答|回复|解释)得?"
                r"(?:太|那么|这么|很)?(?:长|多|啰嗦|啰唆|罗嗦|冗长)(?!时间|期|大|久|远|途|城|江|高|辈|度|少)|"
                r"(?:回答|回复|解释|讲解)(?:别|不要)(?:太|那么|这么)?(?:长|啰嗦|冗长)|"
                r"(?:别|不要)(?:再)?(?:啰嗦|啰唆|罗嗦|长篇大论)|长话短说"), "简短"),
    (re.compile(rf"\bkeep (?:your |the |my |these |those )?{_EN_ANSWERS} (?:short|brief|concise)\b|"
                rf"(?:^|[,.!;]\s*|\b(?:please|pls|just|and|so)\s+)(?:keep (?:it|them)|be) (?:short|brief|concise)\b|"
                rf"\b(?:answer|reply|respond|explain)(?: (?:me|it|this|that))? (?:briefly|concisely|in short)\b|"
                rf"\b(?:give me|i (?:want|need|prefer)|i'd like|i would like|only) (?:(?:very|really) )?"
                rf"(?:short|brief|concise)(?:er)? {_EN_ANSWERS}|\b(?:short|brief) {_EN_ANSWERS} only\b|"
                rf"\b(?:don't|do not|dont) (?:give me )?(?:long|lengthy|wordy) {_EN_ANSWERS}|"
                rf"\byour {_EN_ANSWERS} (?:are|is) (?:way |much |far )?too long", re.I), "short answers"),
)
_SPAN = r"[^，。！？；、,.!?;\n]"
#: a concept the user confuses or does not understand (every group is one), in a clause of their own; a group is
#: read whole (``claims._concept``: a phrase, or nothing), never cut at a length
CONFUSIONS: tuple[re.Pattern[str], ...] = (
    re.compile(rf"(?:把|将)({_SPAN}+?)(?:和|与|跟)({_SPAN}+?)(?:搞混|弄混|混淆|搞错|弄错|分不清|弄反|记混)"),
    re.compile(rf"(?:分不清|搞不清|区分不了)(?:楚)?({_SPAN}+?)(?:和|与|跟)({_SPAN}+)"),
    re.compile(rf"(?:不懂|不明白|不理解|搞不懂|弄不懂|看不懂|没懂|没搞懂|学不会)({_SPAN}+)"),
    re.compile(r"\bi (?:always |often |keep |still )?(?:confuse|mix up|mixing up|get confused between)\s+"
               r"(.+?)\s+(?:and|with)\s+([^,.!?;\n]+)", re.I),
    re.compile(r"\bi (?:still )?(?:don't|do not|dont) (?:understand|get)\s+([^,.!?;\n]+)", re.I),
    re.compile(r"\bi'?m (?:confused|lost) (?:about|by|with)\s+([^,.!?;\n]+)", re.I),
)
#: A correct statement of a concept's core fact shows mastery of it (and is counter-evidence to a
#: learning obstacle on it): "我不懂三角函数" … later "sin²x+cos²x=1".
MASTERY: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"sin\s*(?:\^\s*2|²)\s*\(?x\)?\s*\+\s*cos\s*(?:\^\s*2|²)\s*\(?x\)?\s*=\s*1", re.I), "三角函数"),
    (re.compile(r"tan\s*\(?x\)?\s*=\s*sin\s*\(?x\)?\s*/\s*cos\s*\(?x\)?", re.I), "三角函数"),
    (re.compile(r"加速度(?:是|就是|等于)速度(?:的)?变化(?:率|量除以时间)"), "加速度"),
    (re.compile(r"a\s*=\s*(?:Δ|delta\s*)v\s*/\s*(?:Δ|delta\s*)t", re.I), "加速度"),
    (re.compile(r"\bF\s*=\s*m\s*\*?\s*a\b|合外力等于质量乘以加速度"), "牛顿第二定律"),
    (re.compile(r"\bp\s*=\s*m\s*\*?\s*v\b|动量(?:等于|是)质量乘以速度"), "动量"),
)
