"""English: the rules of what a user says of themselves, and how an object is read — the phrase after the verb
up to the first clause boundary (that, because, when, but, a dash, …), without leading articles or
possessives or trailing time words, never a pronoun and never cut at a length."""

from __future__ import annotations

import re

from memory.anchoring import is_anaphoric
from memory.claims.rule import Read, Rule
from memory.models import EventType

MAX_WORDS = 6  # longer is a clause, not a phrase: no belief rather than a cut one
MAX_LIST_WORDS = 8  # "X and Y" longer than this is a clause with "and" in it, not a list

#: what may stand before the speaker at a clause's start ("Honestly, I…")
LEAD = (r"(?:(?:well|oh|so|and|but|also|actually|honestly|anyway|btw|by the way|frankly|personally|yeah|yes|"
        r"since|because|no|ok|okay|hi|hey|hello|to be honest|as for me|for me|in fact|plus|though|now|"
        r"on (?:another|a different|a related|a side) note|speaking of which|that said)\s*[,!]?\s+)*")
_ADV = (r"(?:(?:really|truly|also|just|do|absolutely|totally|genuinely|definitely|especially|still|always|actually|"
        r"kind of|kinda|sort of|quite|pretty much|very much|much|generally|usually|tend to|seriously|deeply|"
        r"(?!(?:hardly|barely|scarcely|rarely|seldom)\b)\w+ly)\s+)*")
KIN = ("mom|mother|mum|dad|father|parents|brother|sister|brothers|sisters|siblings|son|daughter|sons|daughters|"
       "kid|kids|children|child|wife|husband|grandma|grandmother|grandpa|grandfather|grandparents|aunt|uncle|cousin|niece|"
       "nephew|twins|grandson|granddaughter|grandkids|grandchildren|stepson|stepdaughter|stepmom|stepdad|"
       "in-laws|missus|fiancé|fiancée|fiance|fiancee")
_OCCUPATION = re.compile(
    r"\b(?:teacher|nurse|doctor|engineer|developer|programmer|designer|lawyer|attorney|accountant|chef|cook|barista|"
    r"student|researcher|scientist|professor|manager|consultant|analyst|writer|author|editor|journalist|photographer|"
    r"artist|musician|driver|pilot|mechanic|electrician|plumber|carpenter|farmer|librarian|pharmacist|dentist|"
    r"therapist|physician|surgeon|resident|intern|paramedic|firefighter|officer|soldier|veteran|clerk|cashier|"
    r"salesperson|realtor|real estate agent|architect|entrepreneur|founder|co-founder|freelancer|contractor|"
    r"technician|coach|tutor|instructor|lecturer|principal|nanny|caregiver|stay-at-home (?:dad|mom|mum|parent)|"
    r"housewife|homemaker|retiree|vet|veterinarian|biologist|chemist|physicist|economist|historian|archaeologist|"
    r"geologist|ecologist|specialist|coordinator|administrator|assistant|secretary|receptionist|waiter|waitress|"
    r"bartender|baker|butcher|tailor|hairdresser|stylist|translator|interpreter|flight attendant|guard|planner|"
    r"marketer|recruiter|supervisor|director|executive|ceo|cto|cfo|banker|trader|broker|auditor|counselor|"
    r"psychologist|psychiatrist|social worker|youtuber|streamer|blogger|influencer|animator|illustrator|filmmaker|"
    r"producer|actor|actress|dancer|singer|athlete|trainer|dietitian|nutritionist|midwife|paralegal|judge|"
    r"detective|courier|welder|machinist|postdoc|sociologist|mathematician|statistician|curator|conservator|"
    r"surveyor|inspector|dispatcher|operator)s?$", re.I)
_NOT_OCCUPATION = re.compile(r"^(?:fan|big fan|huge fan|beginner|newbie|bit|little|lot|person|guy|girl|former|ex|"
                             r"retired|aspiring|wannabe|future|morning person|night owl|type|kind|sucker|believer|"
                             r"lover|member|user|customer|client|buyer|owner of)\b", re.I)
_EMOTION = ("tired|exhausted|stressed|stressed out|anxious|nervous|happy|sad|upset|frustrated|overwhelmed|lonely|"
            "bored|excited|worried|scared|afraid|angry|depressed|down|burned out|burnt out|calm|relieved|confused|"
            "homesick|heartbroken|hopeful|grateful|thrilled|miserable|confident|concerned|drained|burnt-out|stuck")
_GOAL_VERBS = (r"learn|become|get better at|improve|pass|run|finish|complete|build|start|launch|write|publish|lose|"
               r"gain|save|buy|travel|visit|master|open|adopt|move to|get into|get a|find a|quit|earn|reach|"
               r"switch to|transition into|retire|train for|qualify for|apply to")
_BOUNDARY = re.compile(
    r"\s+(?:that|which|who|whom|whose|because|since|when|whenever|while|but|so|as|if|although|though|until|"
    r"unless|whereas|where|before|after|than|or|cause|cuz|like|especially|except|instead|due to|rather|"
    r"for|with no|without|in my|at home|to keep|to help|to make|within|outside of|at work|in my free time|"
    r"by (?:the end|next|then|\d)|in the (?:next|coming)|(?:in )?under \d|someday|one day|eventually|soon)\b.*$|"
    r"\s*[;:(—–]\s*.*$|\s+-\s.*$", re.I)
_LIST_END = re.compile(_BOUNDARY.pattern.replace("|than|or|", "|than|"), re.I)  # a list's end: "or" goes on
_CONTRAST = re.compile(r",?\s+(?:not|rather than|instead of)\s.*$", re.I)
#: a light verb's gerund cut before its relative clause says nothing: "using devices [that support Linux]"
_LIGHT = re.compile(r"^(?:using|having|getting|doing|making|working with|dealing with)\s+\S+(?:\s+\S+)?$", re.I)
_RELATIVE = re.compile(r"\s+(?:that|which|who|whom|whose|where)\s", re.I)
_TRAILING = re.compile(
    r"(?:\s+(?:a lot|so much|very much|too|as well|anymore|these days|lately|right now|now|today|at all|"
    r"a bunch|more|most|best|in general|overall|honestly|though|either|this (?:week|month|year)|"
    r"every (?:day|week)|all the time|sometimes|for (?:me|now)|last (?:week|month|year|night|time)|yesterday|"
    r"recently|this morning|(?:a|one|two|three|a few) (?:days?|weeks?|months?|years?) ago|in (?:all|any) "
    r"(?:its |their )?forms?|of any kind|whatsoever))+$", re.I)
_LEADING = re.compile(r"^(?:the|a|an|my|our|some|any|all|both|certain|really|very|most|more|"
                      r"(?:any |every )?(?:form|kind|type|sort)s? of)\s+", re.I)
DEIXIS = re.compile(
    r"^(?:it|its|it's|this|that|these|those|them|him|her|his|hers|you|your|yours|yourself|what|which|how|"
    r"something|anything|everything|nothing|one|ones|here|there|he|she|they|their|we|us|me|myself|mine|"
    r"to|hear|hearing|when|where|who|whoever|whatever|doing|being|having|so|such|same|other|others|lots|"
    r"about|with|for|of|in|on|at|by|from|into|over|and|or|but|not|no|more|most|much|many|each|every|"
    r"idea|ideas|suggestion|suggestions|plan|option|options|approach|way|thing|things|stuff)\b", re.I)
#: an object ending so is about the conversation, not the user: "the wildlife idea", "learning more about it"
_HEAD = re.compile(r"\b(?:idea|ideas|suggestion|suggestions|recommendation|recommendations|tip|tips|point|"
                   r"points|option|options|list|answer|answers|explanation|question|it|that|this|them|those|"
                   r"one|ones|you|yours|stuff|thing|things)$", re.I)


#: a kind word whose post-modifier names what the user means: "films involving graphic violence" → graphic
#: violence, "homes with an abundance of windows" → abundance of windows (the kind alone says nothing of them)
_KIND = re.compile(
    r"^(?:(?:watch|watching|read|reading|eat|eating|listen to|listening to|play|playing|wear|wearing|use|using|"
    r"visit|visiting|stay in|staying in|do|doing)\s+)?(?:(?:the|a|an|any|all|most|some|those|these)\s+)?"
    r"(?:[\w-]+\s+)?(?:films?|movies?|shows?|series|books?|novels?|music|songs?|genres?|routines?|workouts?|"
    r"exercises?|activities|homes?|houses?|places?|restaurants?|foods?|dishes|meals?|recipes?|products?|clothes|"
    r"clothing|games?|destinations?|trips?|tours?|hotels?|content|stories|apps?|cars?|vehicles?|"
    r"options?|things|stuff|anything|something)\s+"
    r"(?:(?:that|which)\s+(?:are\s+|is\s+)?(?:\w+ly\s+)?(?:involve|involves|include|includes|feature|features|"
    r"contain|contains|based on|focused on|centered on|about|full of|heavy on|set in|have|has)|involving|featuring|"
    r"including|containing|with|full of|based on|"
    r"focused on|centered on|set in)\s+(.+)$", re.I)


def _meant(text: str) -> str:
    """What a phrase headed by a kind word means: its post-modifier's object ("shows based on X" → X)."""
    kind = _KIND.match(text.strip())
    return kind.group(1) if kind else text


def _bare(text: str) -> str:
    """``text`` without its leading articles, possessives and quantifiers ("a more private" → private)."""
    text = text.strip()
    while (shorter := _LEADING.sub("", text)) != text:
        text = shorter
    return text


def _phrase(text: str) -> str:
    """The whole phrase at the start of ``text``, or "" when there is none a belief can hold."""
    text = _meant(text)
    head = _RELATIVE.split(text.strip(), maxsplit=1)
    if len(head) > 1 and _LIGHT.match(head[0]):
        return ""
    pieces = _BOUNDARY.sub("", text.strip()).split(",")
    found = pieces[0]
    for piece in pieces[1:]:  # "small, boutique hotels": a list of modifiers, not the clause's end
        if len(_bare(found).split()) > 1 or not piece.strip() \
                or re.match(r"\s*(?:and|but|or|i|so|which)\b", piece, re.I):
            break
        found += "," + piece
    found = _bare(_TRAILING.sub("", re.sub(r"[.!?…。]+$", "", found).strip()))
    if not found or _HEAD.search(found) or len(found.split()) > MAX_WORDS:
        return ""
    if DEIXIS.match(found) and not (is_anaphoric(found) and len(found.split()) > 1):
        return ""  # "that red button" names a kind: anchored downstream (``memory.anchoring``) or not made
    return found


# --- readers of a rule's group ---------------------------------------------------------------------------------

def phrase(text: str) -> list[str]:
    """One phrase: what follows "and" is another clause ("My goal is to predict X and get Y": predict X)."""
    found = _phrase(re.split(r"\s+and\s+", text, maxsplit=1)[0])
    return [found] if found else []


def phrases(text: str) -> list[str]:
    """"X and Y", "X, Y or Z": one object each (every part a phrase, or the whole as one)."""
    listed = _CONTRAST.sub("", _LIST_END.sub("", _meant(text)))  # to the clause's end or a contrast ("…, not Z")
    if re.search(r"\s(?:and|or)\s", listed) and len(listed.split()) <= MAX_LIST_WORDS:
        parts = [_phrase(p) for p in re.split(r",?\s+(?:and also|and|or)\s+|,\s+", listed)]
        if all(parts):
            return parts
    whole = _phrase(text)
    return [whole] if whole else []


def goal(text: str) -> list[str]:
    """What they want to achieve, without what it is about ("write a new book [about …]")."""
    return phrase(re.split(r"\s+(?:about|so that|so)\s+", text, maxsplit=1)[0])


_LANGUAGES = ("English|Chinese|Mandarin|Cantonese|Spanish|Portuguese|French|German|Italian|Dutch|Russian|Japanese|"
              "Korean|Arabic|Hindi|Urdu|Bengali|Punjabi|Tamil|Telugu|Turkish|Persian|Farsi|Polish|Ukrainian|Greek|"
              "Hebrew|Swedish|Norwegian|Danish|Finnish|Czech|Hungarian|Romanian|Vietnamese|Thai|Indonesian|Malay|"
              "Tagalog|Filipino|Swahili|Catalan|Basque|Irish|Welsh|ASL|Sign Language")
_LANGUAGE = re.compile(rf"\b(?:{_LANGUAGES})\b")
_DEMONYM = re.compile(r"(?:an|ese|ish|ic|i)$")  # "I'm Canadian" is no name
#: what "I'm X." says when X is no name ("I'm Back!", "I'm Sorry")
_NOT_NAME = re.compile(r"^(?:fine|good|great|okay|ok|sorry|back|ready|done|sure|well|happy|glad|new|home|here|"
                       r"alright|tired|hungry|busy|free|lost|late|early|confused|stuck|excited|bored|curious|"
                       r"serious|kidding|joking|listening|interested|in|out|up|down|on|off|not|so|very|just|still|"
                       r"also|too|all|always|never|really|actually|totally|glad|thrilled|honored|blessed|grateful)$",
                       re.I)


def languages(text: str) -> list[str]:
    """The languages named in a list to the clause's end ("Spanish at home and English at work")."""
    return _LANGUAGE.findall(_LIST_END.sub("", " " + text.strip()))


def name(text: str) -> list[str]:
    """A name said after "I'm" alone: not a language, a nationality or an everyday word."""
    text = text.strip()
    no = _LANGUAGE.fullmatch(text) or _DEMONYM.search(text) or DEIXIS.match(text) or _NOT_NAME.match(text)
    return [] if no else [text]


def word(text: str) -> list[str]:
    return [text.strip()] if text.strip() else []


def age(text: str) -> list[str]:
    text = text.strip()
    return [str(int(text))] if text.isdigit() and 1 <= int(text) <= 120 else []


def occupation(text: str) -> list[str]:
    """An occupation by name ("a nurse at a children's hospital": the nurse)."""
    found = _phrase(re.sub(r"\s+(?:at|in|for|with|from|on)\s.*$", "", text))
    return [found] if found and _OCCUPATION.search(found) and not _NOT_OCCUPATION.match(found) else []


#: a family member said with the speaker's possessive ("my mom"): true in any sentence, reported speech too
KIN_RULE = Rule("family", "family", EventType.identity, re.compile(rf"(?:^|[^\w'’])my ({KIN})\b", re.I), word)


def _rules() -> list[Rule]:
    i = r"^i"
    im = r"^(?:i(?:'m|’m| am)|im)"

    def rule(family: str, relation: str, kind: EventType, pattern: str, read: Read, case: int = re.I) -> Rule:
        return Rule(family, relation, kind, re.compile(pattern, case), read)

    identity, likes, dislike = EventType.identity, EventType.preference, EventType.dislike
    return [
        rule("age", "age", EventType.age_declaration,
             rf"{im}\s+(\d{{1,3}})(?:\s*(?:years?\s*old|yrs?\s*old|y/?o))?\.?(?=$|,\s|\s+and\b)", age),
        rule("age", "age", EventType.age_declaration, rf"{i} (?:just )?turned (\d{{1,3}})\b", age),
        rule("age", "age", EventType.age_declaration, r"^my age is (\d{1,3})\b", age),
        rule("age", "age", EventType.age_declaration, rf"{im} an? (\d{{1,3}})[- ]years?[- ]old\b", age),
        rule("name", "name", identity, r"(?i:^(?:my name is|my name's|my name’s|(?:just |please )?call me|"
             r"you can call me|i'm called|i am called))\s+([A-Z][a-z'’-]+(?: [A-Z][a-z'’-]+){0,2})\b", word, 0),
        rule("name", "name", identity, r"(?i:^(?:i'm|i’m|i am|this is)) ([A-Z][a-z'’-]+)(?i:,? (?:by the way|btw|"
             r"here|nice to meet you))?[.!]?$", name, 0),
        rule("location", "location", identity, r"(?i:^(?:i (?:live|currently live|now live|grew up|"
             r"was born and raised|was born) in|i(?:'m|’m| am) (?:from|based in|living in)|i(?:'ve|’ve| have) lived in|"
             r"my home ?town is|home is|i (?:just |recently |finally )?moved (?:here )?to|i relocated to))\s+"
             r"((?:the )?[A-Z][\w'’.-]*(?:,? [A-Z][\w'’.-]*){0,3})", word, 0),
        rule("location", "location", identity, r"(?i:^i(?:'m|’m| am|m)? (?:an? |the )?(?:[\w-]+ ){0,3}?(?:"
             rf"{_OCCUPATION.pattern[6:-5]})s? (?:at [\w\s'’-]{{1,40}}? )?in) ([A-Z][\w'’.-]*(?: [A-Z][\w'’.-]*)?)\b",
             word, 0),
        rule("occupation", "occupation", identity, rf"{i} work (?:as|in|at|for) (.+)$", phrase),
        rule("occupation", "occupation", identity, rf"{i} work (?:nights|days|shifts|full-time|part-time) as (.+)$",
             occupation),
        rule("occupation", "occupation", identity, rf"{im} (?:an? |the )(.+)$", occupation),
        rule("occupation", "occupation", identity, rf"{i}(?:'m|’m| am|'ve|’ve| have)? (?:just |recently |been )?"
             r"(?:work(?:ing|ed)?|start(?:ing|ed)?(?: my first (?:year|job)| a new job| out| working)?|employed|"
             r"serv(?:e|ing|ed)) as (?:an? )?(.+)$", occupation),
        rule("occupation", "occupation", identity, r"^as an? ([\w\s'’-]{2,30})$", occupation),
        rule("occupation", "occupation", identity,
             r"^my (?:job|occupation|profession|day job) is (?:an? )?(.+)$", phrase),
        rule("grade", "grade", identity, rf"{im} in (?:the )?(\d{{1,2}}(?:st|nd|rd|th)? grade|year \d{{1,2}})\b", word),
        rule("grade", "grade", identity, rf"{im} an? (freshman|sophomore|junior|senior)\b", word),
        rule("school", "school", identity, r"(?i:^i(?:'m|’m| am) (?:a |an )?(?:[\w-]+ ){0,3}(?:at|in)) "
             r"([A-Z][\w'’.-]*(?: [A-Z][\w'’.-]*){0,3} (?:High|School|College|University|Academy|Institute))\b",
             word, 0),
        rule("school", "school", identity, r"(?i:^i (?:go to|study at|attend))\s+"
             r"([A-Z][\w' -]{2,40}(?:School|College|University))", word, 0),
        rule("school", "school", identity, r"(?i:^i(?:'m|’m| am|m)? (?:[\w-]+ ){0,4}?(?:studying [\w\s-]{1,30}?|"
             r"student|major|majoring in [\w\s-]{1,30}?|enrolled) at) ([A-Z][\w&.'’-]*(?: [A-Z][\w&.'’-]*){0,3})",
             word, 0),
        rule("school", "school", identity, r"(?i:^i (?:just |finally )?(?:got into|got accepted (?:to|into|at)|"
             r"was accepted (?:to|into|at)|got admitted to)) ([A-Z][\w&.'’-]*(?: [A-Z][\w&.'’-]*){0,3})", word, 0),
        KIN_RULE,
        rule("family", "family", identity, rf"{i} have (?:a|an|one|two|three|four|\d) "
             rf"(?:little |older |younger |big |baby |twin |teenage )?({KIN})\b", word),
        rule("favourite", "likes", likes, r"^my (?:all-time |absolute |very )?(?:favou?rite|fave)\s+"
             r"[\w\s-]{1,20}?\s+(?:is|are|has to be|would be)\s+(.+)$", phrase),
        rule("dislikes", "dislikes", dislike, rf"{i} {_ADV}(?:(?:don't|do not|dont|don’t) (?:really |particularly |"
             r"much )?(?:like|love|enjoy|care for)|can't stand|cannot stand|can’t stand|hate|dislike|detest|loathe|"
             r"despise)\s+(.+)$", phrases),
        rule("dislikes", "dislikes", dislike, rf"{im} (?:not|never been) (?:a |really a |much of a |the biggest )?"
             r"fan of (.+)$", phrases),
        rule("dislikes", "dislikes", dislike, rf"{i} {_ADV}(?:avoid|have (?:a |an )?(?:strong |firm |real |deep |"
             r"ethical |huge )?(?:aversion|dislike|objection) (?:to|for|towards)|have (?:no|zero|little) interest in)"
             r"\s+(.+)$", phrases),
        rule("dislikes", "dislikes", dislike, rf"{im} (?:not|never) (?:too |very |really |that |particularly |so )?"
             r"(?:keen on|into|fond of)\s+(.+)$", phrases),
        rule("dislikes", "dislikes", dislike, r"^(?:the )?(?:other )?(?:options? (?:involving|with|that "
             r"(?:include|involve)) )?(.+?)(?: options?| ones?| choices?)? (?:doesn't|don't|does not|do not|doesn’t|"
             r"don’t) (?:really |quite |particularly |seem |seem to )*(?:appeal to me|work for me|agree with me|"
             r"suit me|(?:very |that |too |particularly )?appealing(?: to me)?|fit (?:me|my [\w\s]{1,20})|"
             r"align with (?:my|our) values)$", phrases),
        rule("dislikes", "dislikes", dislike, rf"{i} {_ADV}prefer (?:to avoid|not to)\s+(.+)$", phrases),
        rule("likes", "likes", likes, rf"{i} {_ADV}(?:(?:like|love|enjoy|adore|prefer)(?! to avoid| not)|lean towards|"
             r"gravitate towards|have (?:a |an )?(?:strong |clear |real )?(?:preference|soft spot|passion|love) for)"
             r"\s+(.+)$", phrases),
        rule("likes", "likes", likes, rf"{im} {_ADV}(?:a (?:big |huge )?fan of|into|passionate about|obsessed with|"
             r"fond of|(?:particularly |very |really )?(?:interested in|intrigued by|drawn to))\s+(.+)$", phrases),
        rule("style", "learning_style", likes,
             rf"{i} (?:\w+ )?learn (?:best|better|most|fastest) (?:by|with|through|from)\s+(.+)$", phrase),
        rule("style", "learning_style", likes, rf"{im} (?:a |an )((?:visual|auditory|hands-on|kinesthetic|reading|"
             r"practical|slow|fast) learner)\b", word),
        rule("subject", "subject_preference", likes,
             r"^(?:.*?\s(?:and|but)\s+)?(.+?) (?:is|are) (?:\w+ )?my (?:favou?rite|fave?|best) "
             r"(?:subject|class|course)s?\b", phrase),
        rule("obstacle", "learning_obstacle", EventType.concept_confusion,
             r"^(?:.*?\s(?:and|but)\s+)?(.+?) (?:is|are) (?:\w+ )?my (?:worst|weakest|hardest) "
             r"(?:subject|class|course)s?\b", phrase),
        rule("obstacle", "learning_obstacle", EventType.concept_confusion,
             r"^(?:.*?,\s*(?:but|and)?\s*)?([^,]+?) (?:always |really |still |usually |just )?"
             r"(?:trips me up|confuses me|is (?:so |really |too )?hard for me|gives me (?:a hard time|trouble))\b",
             phrase),
        rule("obstacle", "learning_obstacle", EventType.concept_confusion,
             rf"{i}(?:'m|’m| am)? (?:really |still |always )?(?:struggle|struggling|have trouble|have a hard time) "
             r"(?:with )?(.+)$", phrase),
        rule("mastery", "mastery", EventType.statement, rf"{i}(?:'ve|’ve| have)? (?:already |finally )?"
             r"(?:mastered|got the hang of|know how to use)\s+(.+)$", phrase),
        rule("mastery", "mastery", EventType.statement, rf"{im} (?:already |pretty |quite |very |really )?"
             rf"(?:comfortable|confident|fluent) (?:with|in)\s+(?!(?:{_LANGUAGES})\b)(.+)$", phrase),
        rule("language", "language", EventType.statement, rf"{im} (?:\w+ )?(?:fluent|native|bilingual) in\s+(.+)$",
             languages),
        rule("language", "language", EventType.statement, rf"{i} (?:also |mostly |mainly )?speak\s+(?:(?:fluent|some|"
             r"a little|basic|native|mostly)\s+)?(.+)$", languages),
        rule("goal", "goal", EventType.goal, r"^my (?:main |big |biggest |ultimate |long-term |real |personal )?"
             r"(?:goal|dream|aim)s?(?: (?:for|this|next) [\w\s]{1,20}?)?(?: (?:is|are)|:) (?:to )?"
             r"(?!unclear|not\b|simple|easy|hard|clear|different|the same|changing|ambitious)(.+)$", phrase),
        rule("goal", "goal", EventType.goal, rf"{i}(?:'m|’m| am|'ve|’ve| have)? {_ADV}(?:want|hope|plan|planning|aim|"
             r"aiming|intend|trying|try|hoping|determined|working|dream|dreaming|decided) (?:to|of|towards|toward) "
             rf"((?:{_GOAL_VERBS})\b.*)$", goal),
        rule("goal", "goal", EventType.goal, rf"{i}(?:'m|’m| am|'ve|’ve| have)? (?:been )?(?:thinking|considering) "
             r"(?:of |about )?((?:adopting|learning|starting|launching|opening|expanding|writing|building|becoming|"
             r"advancing|improving|switching to|moving to|getting into)\b.*)$", goal),
        rule("emotion", "emotion_state", EventType.emotion, rf"^i(?:'m|’m| am| feel| am feeling|'m feeling|"
             r"’m feeling) (?:so |very |really |a bit |a little |kind of |pretty |quite |super |totally |just |"
             r"honestly |incredibly |extremely |particularly |a lot more |more |still |genuinely )*"
             rf"({_EMOTION})(?:\s+(?:today|right now|now|lately|these days|"
             r"about\b.*|with\b.*|because\b.*))?$", word),
        rule("product", "product_owned", EventType.statement, rf"{i} (?:drive|ride) (?:a|an|the|my) (.+)$", phrase),
        rule("product", "product_owned", EventType.statement, rf"{i} (?:just |recently )?(?:bought|purchased|own|"
             r"got myself) (?:a |an |the |my |two |some )(?:new )?(.+)$", phrase),
    ]


RULES = tuple(_rules())
