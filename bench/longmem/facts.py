"""Planted-fact specifications: what a user (or the assistant) says once, and how it is asked about later.

Each spec is bilingual (``en``/``zh``) so that bilingual users can be asked in the other language.  Fields:

* ``fact``: templates of the answer-bearing message (``{value}`` is the specific to retrieve);
* ``lead``: for assistant facts, the user request the assistant answers;
* ``q``: paraphrased questions (validated against the fact: no long shared character runs);
* ``nb``: confusable neighbours — same kind of thing, different specific (``{alt}``);
* ``old``: for updated facts, the earlier message with the outdated value (``{old}``), a hard negative;
* ``slots``: extra cue slots shared by fact, neighbours and question (drawn from ``BI_SLOTS``);
* ``cue``: templates of terms a user would naturally use when asking (exempt from the paraphrase rule).
"""

# Bilingual slot pools: (en, zh) pairs so the same instance can be rendered in either language.
BI_SLOTS = {
    "trip": [("Lisbon", "里斯本"), ("Kyoto", "京都"), ("Seoul", "首尔"), ("Chengdu", "成都"), ("Bangkok", "曼谷"),
             ("Dali", "大理"), ("Tokyo", "东京"), ("Hangzhou", "杭州"), ("Xiamen", "厦门"), ("Chiang Mai", "清迈")],
    "lib": [(x, x) for x in ["pydantic", "celery", "sqlalchemy", "requests", "numpy", "django", "fastapi"]],
    "service": [(x, x) for x in ["api", "worker", "scheduler", "search", "notifier", "ingest"]],
    "project2": [(x, x) for x in ["refund-service", "kyc-portal", "audit-log", "ops-console", "ledger-sync"]],
    "dish2": [("focaccia", "佛卡夏"), ("whole roast chicken", "整鸡"), ("banana bread", "香蕉面包"),
              ("basque cheesecake", "巴斯克芝士蛋糕"), ("pork belly", "脆皮五花肉")],
    "weight": [(str(w), str(w)) for w in range(52, 92, 3)],
    "newpet": [("kitten", "小猫"), ("puppy", "小狗"), ("hamster", "仓鼠")],
}

NEIGHBOURHOODS = {
    "Lisbon": [("Alfama", "阿尔法玛区"), ("Príncipe Real", "皇家王子区")],
    "Kyoto": [("Gion", "祇园一带"), ("Nakagyo, near Nishiki Market", "锦市场附近的中京区")],
    "Seoul": [("Yeonnam-dong", "延南洞"), ("Seochon", "西村")],
    "Chengdu": [("Yulin", "玉林路一带"), ("Kuanzhai Alley area", "宽窄巷子附近")],
    "Bangkok": [("Ari", "Ari 区"), ("Riverside near Charoen Krung", "湄南河边的石龙军路")],
    "Dali": [("the old town's north gate", "古城北门附近"), ("Shuanglang", "双廊")],
    "Tokyo": [("Shimokitazawa", "下北泽"), ("Kuramae", "藏前")],
    "Hangzhou": [("Beishan Street by the lake", "北山街一带"), ("Manjuelong", "满觉陇")],
    "Xiamen": [("Shapowei", "沙坡尾"), ("Zengcuoan", "曾厝垵")],
    "Chiang Mai": [("Nimman", "宁曼路"), ("the Old City", "古城里面")],
}


def _pool(en, zh):
    """Value maker drawing value/alt/old as distinct picks from a per-language list."""
    def make(rng, lang, slots):
        value, alt, old = rng.sample(en if lang == "en" else zh, 3)
        return {"value": value, "alt": alt, "old": old}
    return make


def _same(values):
    """Language-neutral values (identifiers, versions, paths)."""
    return _pool(values, values)


def _money(rng, lang, slots):
    """Rent-like amounts: the update is a raise, so old < value."""
    if lang == "en":
        old = rng.randrange(1200, 2600, 50)
        return {"old": f"${old:,}", "value": f"${old + rng.randrange(100, 350, 25):,}",
                "alt": f"${old - rng.randrange(200, 400, 50):,}"}
    old = rng.randrange(3000, 9000, 100)
    return {"old": f"{old}块", "value": f"{old + rng.randrange(300, 1200, 100)}块",
            "alt": f"{old - rng.randrange(400, 900, 100)}块"}


def _price(rng, lang, slots):
    value = rng.randrange(1100, 2600, 10) + 9
    alt = value - rng.randrange(150, 500, 10)
    if lang == "en":
        return {"value": f"${value:,}", "alt": f"${alt:,}"}
    return {"value": f"{value * 6}块", "alt": f"{alt * 6}块"}


def _int_range(lo, hi, fmt="{}"):
    def make(rng, lang, slots):
        value, alt, old = rng.sample(range(lo, hi), 3)
        return {"value": fmt.format(value), "alt": fmt.format(alt), "old": fmt.format(old)}
    return make


def _race(rng, lang, slots):
    """Half-marathon times; the newer personal best is faster than the old one."""
    old = rng.randrange(6600, 7800)
    new = old - rng.randrange(240, 420)

    def hms(s):
        return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"
    return {"old": hms(old), "value": hms(new), "alt": hms(old + 300)}


def _shoe(rng, lang, slots):
    value, alt = rng.sample([38, 38.5, 39, 40, 40.5, 41, 42, 42.5, 43, 44, 44.5, 45], 2)
    return {"value": f"{value:g}", "alt": f"{alt:g}"}


def _score(rng, lang, slots):
    value, alt = rng.sample(["6.0", "6.5", "7.0", "7.5", "8.0"], 2)
    return {"value": value, "alt": alt}


MONTHS_EN = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
             "November", "December"]


def _ordinal(d):
    return f"{d}{'th' if 10 <= d % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(d % 10, 'th')}"


def _date(rng, lang, slots):
    """A calendar date in the way people type it: "March 14th" / "3月14号"."""
    picks = [(rng.randrange(1, 13), rng.randrange(1, 29)) for _ in range(3)]
    if lang == "en":
        out = [f"{MONTHS_EN[m - 1]} {_ordinal(d)}" for m, d in picks]
    else:
        out = [f"{m}月{d}号" for m, d in picks]
    return dict(zip(["value", "alt", "old"], out, strict=True))


def _iso_date(rng, lang, slots):
    """Deadlines, written ISO-style; the postponed date is later than the original."""
    year = rng.choice([2025, 2026])
    month, day = rng.randrange(1, 10), rng.randrange(1, 28)
    old = f"{year}-{month:02d}-{day:02d}"
    new_month = month + rng.randrange(1, 3)
    return {"old": old, "value": f"{year}-{new_month:02d}-{rng.randrange(1, 28):02d}", "alt": old}


def _neighbourhood(rng, lang, slots):
    options = NEIGHBOURHOODS[slots["trip"][0]]
    value, alt = rng.sample(options, 2)
    i = 0 if lang == "en" else 1
    return {"value": value[i], "alt": alt[i]}


def _protein(rng, lang, slots):
    weight = int(slots["weight"][0])
    return {"value": str(round(weight * 1.6 / 5) * 5), "alt": str(round(weight * 1.2 / 5) * 5)}


def _pair_pool(en, zh):
    """Two-part values (value, value2) such as a liked and a disliked genre."""
    def make(rng, lang, slots):
        (value, value2), (alt, _) = rng.sample(en if lang == "en" else zh, 2)
        return {"value": value, "value2": value2, "alt": alt}
    return make


def S(key, cat, topic, make, fact, q, nb=None, old=None, lead=None, who="user", slots=(), cue=()):
    """Build one fact spec (a plain dict keeps the bank easy to read and extend)."""
    return {"key": key, "cat": cat, "topic": topic, "make": make, "fact": fact, "q": q, "nb": nb or {},
            "old": old, "lead": lead, "who": who, "slots": tuple(slots), "cue": tuple(cue)}


NAMES_EN = ["Rosalind", "Wesley", "Imogen", "Caspian", "Delphine", "Rupert", "Odette", "Lucian", "Marisol",
            "Barnaby", "Thea", "Ignatius", "Sunniva", "Cormac"]
NAMES_ZH = ["欧阳明", "邵一凡", "顾晓", "黎川", "贺斌", "殷悦", "童宁", "阮思远", "甘露", "柏杨", "邢磊", "岳琳"]
PET_NAMES = (["Biscuit", "Pickle", "Mochi", "Waffles", "Juniper", "Pepper", "Noodle", "Ziggy", "Olive", "Maple",
              "Toast", "Bruno", "Nugget", "Pumpkin"],
             ["团子", "豆包", "年糕", "橘子", "芝麻", "花卷", "布丁", "土豆", "馒头", "栗子", "汤圆", "可乐", "奶盖"])

SPECS = [
    # ---------------------------------------------------------------- name
    S("new_pet", "name", "pets", _pool(*PET_NAMES), slots=["newpet"], cue=["{newpet}"],
      fact={"en": ["Big news: we brought home a {newpet} on Saturday! Tiny, grey, very loud. We're calling her "
                   "{value}.", "Guess who has a {newpet} now :) She's called {value} and she already owns the sofa."],
            "zh": ["告诉你个好消息，周六我们家接回来一只{newpet}！灰灰的小小一只，特别能叫，名字叫{value}。",
                   "我们家多了只{newpet}哈哈，起名叫{value}，已经霸占沙发了。"]},
      q={"en": ["What name did we give the {newpet} we got?", "Remind me what our {newpet}'s name is?"],
         "zh": ["我们家新来的那只{newpet}叫啥来着？", "我家{newpet}取的名字是什么？"]},
      nb={"en": ["{friend}'s {newpet} is named {alt} — we met it at the park and it's hilarious.",
                 "My neighbour's {newpet} is called {alt}, it screams at our door every morning."],
          "zh": ["{friend}家的{newpet}叫{alt}，上次在小区碰到，太逗了。",
                 "邻居家的{newpet}叫{alt}，每天早上在我们门口叫。"]}),
    S("sister_partner", "name", "family", _pool(NAMES_EN, NAMES_ZH), cue=["{sister}"],
      fact={"en": ["{sister} finally introduced us to her boyfriend, {value}. He's a paramedic and makes terrible "
                   "puns; Mom loved him."],
            "zh": ["{sister}终于把她男朋友带回家了，叫{value}，是个急救员，特别爱讲冷笑话，我妈很喜欢他。"]},
      q={"en": ["Who's the guy {sister} is dating now? What's he called?", "What was the name of {sister}'s new man?"],
         "zh": ["{sister}现在交往的那个人叫什么名字？", "{sister}的对象叫啥来着？"]},
      nb={"en": ["{friend} is seeing someone new too, a guy called {alt} who works in finance."],
          "zh": ["{friend}最近也谈恋爱了，对象叫{alt}，在银行上班。"]}),
    S("new_manager", "name", "work", _pool(NAMES_EN, NAMES_ZH),
      old={"en": ["My manager {old} has been great about letting me work from home on Fridays."],
           "zh": ["我现在的直属领导是{old}，人挺好的，周五允许在家办公。"]},
      fact={"en": ["Reorg news: {old} moved to the platform group, so from Monday I report to {value} instead."],
            "zh": ["组织架构调整了，{old}调去平台组了，下周一开始我汇报给{value}。"]},
      q={"en": ["Who's my current manager after the team shuffle?", "Who is my boss at this point?"],
         "zh": ["部门调整之后我现在的上级是谁？", "我现在归谁管？"]}),
    S("dentist", "name", "health", _pool(["Okafor", "Lindqvist", "Moreau", "Patel", "Brennan", "Nakamura"],
                                         ["周医生", "林医生", "方医生", "蒋医生", "唐医生", "白医生"]),
      fact={"en": ["The dentist I finally liked is Dr. {value} at the clinic on Harbour Street — gentle and doesn't "
                   "lecture."],
            "zh": ["终于找到一个靠谱的牙医，{value}，在滨江路那个诊所，下手很轻也不唠叨。"]},
      q={"en": ["Which tooth doctor did I end up trusting?"], "zh": ["我说过比较满意的那个看牙的大夫是谁？"]},
      nb={"en": ["{coworker} swears by Dr. {alt}, but that place is across town.",
                 "{sister} goes to a Dr. {alt}, she says he's fine but pricey."],
          "zh": ["{coworker}推荐她的牙医{alt}，不过太远了。",
                 "{sister}去的是{alt}那里，说人还行就是贵。"]}),
    S("friend_baby", "name", "family", _pool(["Arlo", "Jasper", "Milo", "Otis", "Ezra", "Rowan", "Silas"],
                                             ["乐乐", "安安", "多多", "果果", "糖糖", "十一", "小满"]),
      cue=["{friend}"],
      fact={"en": ["{friend} had the baby last night! A little boy, they named him {value}."],
            "zh": ["{friend}昨晚生了！是个男孩，小名叫{value}。"]},
      q={"en": ["What did {friend} and her partner call their newborn?"], "zh": ["{friend}家刚出生的宝宝叫什么？"]},
      nb={"en": ["{coworker2} is expecting too and they've picked {alt} if it's a girl."],
          "zh": ["{coworker2}也快生了，说如果是女儿就叫{alt}。"]}),
    S("plumber", "name", "home", _pool(["Dave", "Stelios", "Gareth", "Miguel", "Tomasz", "Kwame"],
                                       ["刘师傅", "马师傅", "赵师傅", "孙师傅", "胡师傅", "高师傅"]),
      fact={"en": ["The plumber who sorted out the boiler was a guy called {value}; I saved his number because he was "
                   "quick and cheap."],
            "zh": ["上次修热水器的是{value}，又快又便宜，我把他电话存下来了。"]},
      q={"en": ["Who was the tradesman that repaired our heating? I want to call him again.",
                "Who fixed our boiler that time? I need to call him again."],
         "zh": ["之前帮我们修好家里烧水设备的人是哪位？想再找他。", "热水器是哪位师傅修的来着？"]},
      cue=["boiler", "热水器"],
      nb={"en": ["The electrician the landlord sent was {alt}, he was an hour late."],
          "zh": ["房东叫来的电工是{alt}，迟到了一个小时。"]}),
    S("coach", "name", "fitness", _pool(["Jess", "Marco", "Aisha", "Bjorn", "Carmen", "Dmitri"],
                                        ["小林教练", "阿强", "Mia 教练", "老许", "婷婷教练", "大熊"]),
      fact={"en": ["Signed up for personal training — my coach is {value}, tough but funny, and she writes my "
                   "programme in a notebook."],
            "zh": ["报了私教课，我的教练是{value}，很严格但挺逗的，训练计划都手写在本子上。"]},
      q={"en": ["Who's the one I do one-on-one sessions with at the gym?", "Who's the coach I work with one-on-one?"],
         "zh": ["我在健身房上一对一课，带我的人叫什么？"]},
      nb={"en": ["{friend} trains with {alt} at my gym, apparently that coach is brutal."],
          "zh": ["{friend}在我那家健身房跟{alt}练，据说特别狠。"]}),
    S("starter_name", "name", "food", _pool(["Clint Yeastwood", "Bread Pitt", "Doughlores", "Sir Loaf"],
                                            ["发发", "酵母君", "小面团", "咕嘟"]), who="assistant",
      lead={"en": ["My sourdough starter is finally bubbly! Help me give it a silly name?"],
            "zh": ["我养的酸面种终于冒泡了！帮它起个好玩的名字？"]},
      fact={"en": ["Congrats! How about \"{value}\"? It has the right amount of drama for something that lives in a "
                   "jar."],
            "zh": ["恭喜！叫“{value}”怎么样？住在罐子里的小家伙就得有个可爱的名字。"]},
      q={"en": ["What was the funny name you came up with for my bread culture?"],
         "zh": ["你给我那罐做面包的老面起的名字是什么？"]}),
    # ---------------------------------------------------------------- place
    S("sister_ramen", "place", "food", _pool(["Menya Kaito", "Ramen Ikki", "Hanabi Noodle Bar", "Tatsu Ramen",
                                              "Ippudo on 3rd", "Mensho Tokyo"],
                                             ["一兰拉面", "面屋武藏", "博多一幸舍", "豚王", "花丸拉面", "凪拉面"]),
      cue=["{sister}"],
      fact={"en": ["{sister} took me to {value} for her birthday — tiny noodle bar, the tonkotsu broth was unreal."],
            "zh": ["{sister}过生日带我去了{value}，一家很小的面馆，豚骨汤底绝了。"]},
      q={"en": ["Which ramen joint did {sister} pick when we celebrated her?",
                "What's the ramen spot {sister} chose for her special day?"],
         "zh": ["{sister}生日那天请我吃的那家拉面店叫啥？"]},
      nb={"en": ["{cousin} keeps raving about {alt}, another ramen place downtown, but the queue is always huge.",
                 "{friend2} swears the best tonkotsu in town is at {alt}."],
          "zh": ["{cousin}一直安利{alt}，也是家拉面店，就是排队太久。",
                 "{friend2}说全城最好吃的豚骨拉面在{alt}。"]}),
    S("trip_hotel", "place", "travel", _pool(["Hotel Amara", "The Linden House", "Harbor View Inn", "Casa Azul",
                                              "Hotel Marlow", "The Wren", "Moxy Central"],
                                             ["全季酒店", "亚朵酒店", "桔子水晶", "山语民宿", "丽枫酒店",
                                              "维也纳酒店"]),
      slots=["trip"], cue=["{trip}"],
      fact={"en": ["Booked it! For {trip} we're staying at {value} — the one with the rooftop pool."],
            "zh": ["订好了！去{trip}住{value}，就是带屋顶泳池那家。"]},
      q={"en": ["Which hotel did we reserve for the {trip} trip?"], "zh": ["去{trip}那次我们最后定的是哪家酒店？"]},
      nb={"en": ["For {trip} we also looked at {alt} but it was miles from the old town.",
                 "Last time we were in {trip} we stayed at {alt}, it was fine but noisy."],
          "zh": ["{trip}那边本来还看了{alt}，但离老城区太远了。",
                 "上次去{trip}住的是{alt}，还行就是有点吵。"]}),
    S("moved_city", "place", "home", _pool(["Munich", "Rotterdam", "Leeds", "Ottawa", "Gothenburg", "Porto"],
                                           ["苏州", "厦门", "合肥", "珠海", "佛山", "无锡"]),
      old={"en": ["We've just moved to {old}! Still living out of "
                  "boxes."], "zh": ["我们刚搬到{old}，家里还全是箱子。"]},
      fact={"en": ["Plot twist: we're relocating again — {partner}'s job is moving us from {old} to {value} next "
                   "month."],
            "zh": ["又要搬家了，{partner}工作调动，下个月从{old}搬去{value}。"]},
      q={"en": ["Which city am I based in now?", "Where are we living now after {partner}'s transfer?"],
         "zh": ["我现在住在哪个城市？", "{partner}换工作地点以后我们住哪个城市？"]}, cue=["{partner}"]),
    S("gym", "place", "fitness", _pool(["IronWorks", "FitHub on 5th", "Pulse Studio", "the YMCA on Elm",
                                        "Anytime Fitness", "Crunch"],
                                       ["乐刻", "超级猩猩", "威尔士", "一兆韦德", "金吉鸟", "Keep 健身"]),
      old={"en": ["I joined {old} near the office, it's cheap but always packed."],
           "zh": ["我在公司附近办了{old}的卡，便宜但人巨多。"]},
      fact={"en": ["Cancelled my old membership and switched to {value} — it's quieter and has a proper squat rack."],
            "zh": ["把之前的卡退了，换到{value}了，人少，深蹲架也多。"]},
      q={"en": ["Which gym do I go to nowadays?"], "zh": ["我现在是在哪家健身房练？"]}),
    S("parents_town", "place", "family", _pool(["Harrogate", "Bend, Oregon", "Ithaca", "Galway", "Bruges", "Tromsø"],
                                               ["绍兴", "荆州", "赣州", "潍坊", "宜宾", "常德"]),
      fact={"en": ["My parents still live in {value}, the little town where I grew up — about three hours by train."],
            "zh": ["我爸妈还住在老家{value}，坐高铁三个小时左右。"]},
      q={"en": ["Where do my mom and dad live?"], "zh": ["我父母住在哪里？"]},
      nb={"en": ["{partner}'s parents are in {alt}, so holidays are always a negotiation.",
                 "{friend} keeps trying to get me to join {alt} with her."],
          "zh": ["{partner}爸妈在{alt}，所以每年过年去谁家都要商量。",
                 "{friend}一直拉我跟她去{alt}。"]}),
    S("bike_shop", "place", "shopping", _pool(["Gearbox Cycles", "Spoke & Chain", "Rapha Clubhouse", "Decathlon",
                                               "Velo Garage"],
                                              ["捷安特专卖店", "迪卡侬", "闪电车店", "美利达门店", "骑迹单车"]),
      fact={"en": ["Finally bought the road bike, from {value} — they threw in a free fitting."],
            "zh": ["公路车终于买了，在{value}买的，还送了一次 fitting。"]},
      q={"en": ["Where did I purchase my new bicycle?", "Which shop did I get my road bike from?"],
         "zh": ["我新的自行车是在哪家店入手的？", "我的公路车在哪买的？"]}, cue=["road bike", "公路车"],
      nb={"en": ["{friend} got hers from {alt}, but they were out of my size."],
          "zh": ["{friend}是在{alt}买的车，但那边没有我的尺码了。"]}),
    S("weekend_cafe", "place", "coding", _pool(["Fernwood Coffee", "Kettle & Crumb", "Bean There", "Little Owl Café",
                                                "Northside Roasters"],
                                               ["Manner", "Seesaw", "半岛咖啡", "木门咖啡", "%Arabica"]),
      fact={"en": ["On Saturdays I do my side-project coding at {value}, the café with the big shared table."],
            "zh": ["我周六一般去{value}写自己的小项目，就是有张大长桌的那家咖啡馆。"]},
      q={"en": ["Where do I usually hack on my own stuff at weekends?"],
         "zh": ["周末我常去敲代码的是哪家咖啡店？"]},
      nb={"en": ["{coworker} prefers {alt} for working, but the wifi there is awful."],
          "zh": ["{coworker}更喜欢去{alt}，但那边网太差了。"]}),
    S("stay_area", "place", "travel", _neighbourhood, who="assistant", slots=["trip"], cue=["{trip}"],
      lead={"en": ["Where should we stay in {trip} for four nights? We like walking and food."],
            "zh": ["去{trip}玩四晚，住哪一片比较好？我们喜欢走路逛吃。"]},
      fact={"en": ["In {trip}, I'd base yourselves in {value}: it's walkable, full of small restaurants, and well "
                   "connected by "
                   "public transport."],
            "zh": ["{trip}的话推荐住在{value}：走路就能逛，小馆子多，坐公共交通去别处也方便。"]},
      q={"en": ["Which area did you suggest we book in {trip}?"], "zh": ["你之前建议我们在{trip}住哪个区域？"]}),
    # ---------------------------------------------------------------- number
    S("rent", "number", "finance", _money,
      old={"en": ["Our rent is {old} a month, which is a lot but the place is great."],
           "zh": ["我们房租一个月{old}，贵是贵但房子不错。"]},
      fact={"en": ["Landlord just raised the rent — from next month we pay {value} instead of {old}. Ouch."],
            "zh": ["房东涨价了，下个月开始从{old}涨到{value}，肉疼。"]},
      q={"en": ["How much is our monthly housing cost at the moment?", "How much rent do we pay now?"],
         "zh": ["我们现在每个月住的地方要交多少钱？", "现在房租多少？"]}),
    S("laptop_price", "number", "shopping", _price, cue=["laptop", "新电脑"],
      fact={"en": ["Ordered the new laptop — {value} after the student discount, which still hurts."],
            "zh": ["新电脑下单了，用了教育优惠还要{value}，心在滴血。"]},
      q={"en": ["What did I end up paying for my computer?", "How much was my new laptop in the end?"],
         "zh": ["我那台笔记本最后花了多少？", "新电脑最后多少钱买的？"]},
      nb={"en": ["{brother} got the same model for {alt} on eBay, used.",
                 "My old laptop cost {alt} back in the day and lasted six years."],
          "zh": ["{brother}在闲鱼上收了台同款二手的，{alt}。",
                 "我之前那台旧电脑当年花了{alt}，用了六年。"]}),
    S("hotel_room", "number", "travel", _int_range(201, 1290),
      fact={"en": ["We're in room {value}, top floor, and you can see the harbour from the bed."],
            "zh": ["我们住{value}房，顶楼，躺床上就能看到海。"]},
      q={"en": ["What was our room number at the hotel on that trip?"], "zh": ["那次旅行我们酒店房间号是多少？"]},
      nb={"en": ["{friend} and {friend2} got room {alt} on that trip, right next to the "
                 "lift.",
                 "Last year in the same hotel we had room {alt}, with a view of the car "
                 "park."], "zh": ["那次{friend}和{friend2}住的是{alt}房，就在电梯旁边。",
                 "去年住同一家酒店，我们住的是{alt}房，窗外是停车场。"]}),
    S("half_marathon", "number", "fitness", _race,
      old={"en": ["Finished my first half marathon in {old}! Legs are dead."],
           "zh": ["第一个半马跑完了，成绩{old}，腿废了。"]},
      fact={"en": ["New PB at the city half this morning: {value}, almost six minutes faster than last time."],
            "zh": ["今天城市半马破 PB 了，{value}，比上次快了快六分钟。"]},
      q={"en": ["What's my fastest 21k result these days?", "What's my half marathon PB at this point?"],
         "zh": ["我现在半程马拉松最好成绩是多少？", "我半马 PB 现在是多少？"]}),
    S("extension", "number", "work", _int_range(2100, 7999), cue=["{coworker}"],
      fact={"en": ["If IT ever asks, {coworker}'s desk extension is {value} — nobody else can reset the VPN "
                   "tokens."],
            "zh": ["记一下，{coworker}的座机分机是{value}，重置 VPN 令牌只能找她。"]},
      q={"en": ["What number do I dial to reach {coworker} internally?"], "zh": ["内线打给{coworker}要拨几号？"]},
      nb={"en": ["The reception desk extension is {alt}, but nobody ever picks "
                 "up.",
                 "{coworker2}'s extension is {alt}, in case the VPN person is "
                 "out."], "zh": ["公司前台的分机是{alt}，不过基本没人接。",
                 "{coworker2}的分机是{alt}，万一她不在可以找他。"]}),
    S("shoe_size", "number", "shopping", _shoe,
      fact={"en": ["For running shoes I'm a {value} EU, half a size up from my normal shoes."],
            "zh": ["我跑鞋穿{value}码，比平时的鞋大半码。"]},
      q={"en": ["What size trainers do I wear?"], "zh": ["我运动鞋穿多大的？"]},
      nb={"en": ["{partner} wears a {alt} and we keep mixing up our shoe "
                 "boxes.",
                 "My hiking boots are a {alt}, they run small."], "zh": ["{partner}穿{alt}码，老把鞋盒拿错。",
                 "我的登山鞋是{alt}码的，那个牌子偏小。"]}),
    S("flat_size", "number", "home", _int_range(48, 130),
      fact={"en": ["The new flat is {value} square metres, which feels huge after the last place."],
            "zh": ["新房子{value}平，比之前那套大太多了。"]},
      q={"en": ["How big is our new apartment?", "How big is the flat we just got?"], "zh": ["我们新家面积多大？"]},
      nb={"en": ["{sister}'s place is only {alt} m² and she has two "
                 "kids."], "zh": ["{sister}家才{alt}平，还住了两个孩子。"]}),
    S("ielts", "number", "study", _score, cue=["IELTS", "雅思"],
      fact={"en": ["Got my IELTS results: {value} overall, writing was the lowest as expected."],
            "zh": ["雅思出分了，总分{value}，写作果然最低。"]},
      q={"en": ["What score did I get on IELTS?"], "zh": ["我雅思考了多少分？"]},
      nb={"en": ["{friend2} just got her IELTS back: {alt}, she's "
                 "thrilled."], "zh": ["{friend2}雅思出分了，{alt}，开心坏了。"]}),
    S("oven", "number", "food", _pool(["220°C for 25 minutes", "200°C for 55 minutes", "180°C for 50 minutes",
                                       "230°C for 40 minutes"],
                                      ["220 度烤 25 分钟", "200 度烤 55 分钟", "180 度烤 50 分钟", "230 度烤 40 分钟"]),
      who="assistant", slots=["dish2"], cue=["{dish2}"],
      lead={"en": ["Making {dish2} for the first time — what temperature and for how long?"],
            "zh": ["第一次做{dish2}，温度和时间怎么设？"]},
      fact={"en": ["Go with {value}, then let it rest for ten minutes before cutting."],
            "zh": ["建议{value}，出炉后放十分钟再切。"]},
      q={"en": ["What oven setting did you tell me for the "
                "{dish2}?"], "zh": ["你之前跟我说做{dish2}要烤几度、烤多久？"]}),
    S("protein", "number", "fitness", _protein, who="assistant", slots=["weight"], cue=["protein", "蛋白"],
      lead={"en": ["How much protein should I aim for a day? I'm {weight} kg and lifting three times a week."],
            "zh": ["我{weight}公斤，一周练三次，每天蛋白质吃多少合适？"]},
      fact={"en": ["Roughly {value} grams a day would be a good target, spread over three or four meals."],
            "zh": ["每天大概{value}克左右比较合适，分三四顿吃。"]},
      q={"en": ["How many grams of protein a day did you suggest for me?"], "zh": ["你建议我每天摄入多少蛋白？"]}),
    S("tea", "number", "food", _pool(["80°C for two minutes", "75°C for 90 seconds", "85°C for three minutes"],
                                     ["80 度泡两分钟", "75 度泡一分半", "85 度泡三分钟"]),
      who="assistant", cue=["green tea", "绿茶"],
      lead={"en": ["My green tea always tastes bitter. What am I doing wrong?"],
            "zh": ["我泡的绿茶总是发苦，哪里不对？"]},
      fact={"en": ["Boiling water scorches green tea. Try {value}, and don't leave the leaves sitting in the cup."],
            "zh": ["开水太烫了会把绿茶烫苦。试试{value}，别让茶叶一直泡在杯子里。"]},
      q={"en": ["What brewing temperature and time did you recommend for my green tea?",
                "How hot should the water be for green tea, according to you?"],
         "zh": ["你教我的绿茶应该用多少度的水、泡多久？"]}),
    S("party_guests", "number", "family", _int_range(18, 60),
      fact={"en": ["We're expecting {value} people for Dad's 60th, including the cousins from out of town."],
            "zh": ["我爸六十大寿预计来{value}个人，外地的亲戚也来。"]},
      q={"en": ["How many guests are coming to my father's big birthday?", "How many guests will Dad's 60th have?"],
         "zh": ["给我爸过寿那次大概有多少客人？"]}, cue=["Dad's 60th", "六十大寿"],
      nb={"en": ["For {partner}'s party last year we had {alt}, and it was already chaos.",
                 "Our wedding had {alt} guests and that already felt like a lot."],
          "zh": ["去年{partner}生日聚会来了{alt}个人，已经够乱了。",
                 "我们结婚那会儿来了{alt}个人，已经觉得很多了。"]}),
    # ---------------------------------------------------------------- code
    S("max_retries", "code", "coding", _int_range(3, 12, "MAX_RETRIES={}"), slots=["project2"],
      cue=["{project}"],
      fact={"en": ["In {project} I set {value} for the payment webhook worker, anything higher and we hammer the "
                   "provider."],
            "zh": ["{project}里支付 webhook 的 worker 我配的是 {value}，再高就把对方接口打爆了。"]},
      q={"en": ["How many attempts did I allow for the billing callback job in {project}?"],
         "zh": ["{project}那个支付回调任务我配置的重试上限是多少？"]},
      nb={"en": ["In {project2} the retry setting is {alt}, because that API rate-limits hard.",
                 "For the email sender we use {alt}, failures there aren't a big deal."],
          "zh": ["{project2}里同一个参数是 {alt}，那边接口限流很严。",
                 "发邮件那个任务我们用的是 {alt}，失败了问题不大。"]}),
    S("deploy_error", "code", "coding", _same(["ERR_CONN_RESET_1042", "E1217", "ORA-01555", "exit code 137",
                                               "ECONNREFUSED 10.0.3.7:6380", "ImagePullBackOff"]),
      fact={"en": ["The deploy failed again with {value}, same as last week, after the base image bump."],
            "zh": ["升级基础镜像之后部署又挂了，报的还是 {value}，跟上周一样。"]},
      q={"en": ["What was the exact error the release kept dying with?", "What error did the deploy keep failing on?"],
         "zh": ["之前发布一直失败时报的错误码是啥？", "部署一直挂的时候报的什么错？"]}, cue=["deploy", "部署"],
      nb={"en": ["The staging job threw {alt} earlier, but that was just a flaky runner.",
                 "Locally I only ever see {alt}, which goes away after a restart."],
          "zh": ["staging 那个 job 之前报过 {alt}，不过只是 runner 不稳定。",
                 "本地偶尔会报 {alt}，重启一下就好了。"]}),
    S("renamed_func", "code", "coding", _same(["fetch_profile_snapshot", "load_account_view", "resolve_member_record",
                                               "read_user_summary"]),
      fact={"en": ["I renamed get_user_data to {value} across the codebase, the old name was lying about what it did."],
            "zh": ["我把 get_user_data 全局改名成 {value} 了，原来的名字跟它干的事完全不符。"]},
      q={"en": ["What's the new name of the user-loading function I refactored?"],
         "zh": ["我重构后那个取用户信息的函数现在叫什么？"]},
      nb={"en": ["{coworker2} wants to rename sync_orders to {alt} too, but that touches three services."],
          "zh": ["{coworker2}也想把 sync_orders 改成 {alt}，但要动三个服务。"]}),
    S("nginx_path", "code", "coding", _same(["/opt/proxy/conf.d/edge.conf", "/srv/app/deploy/nginx/site.conf",
                                             "/home/deploy/infra/nginx/prod.conf",
                                             "/usr/local/openresty/conf/gw.conf"]),
      cue=["nginx"],
      fact={"en": ["The nginx config that actually gets loaded is {value}, not the one in /etc/nginx — that cost me an "
                   "hour."],
            "zh": ["真正生效的 nginx 配置是 {value}，不是 /etc/nginx 下面那个，害我查了一个小时。"]},
      q={"en": ["Where did the live nginx settings file turn out to be?"],
         "zh": ["最后发现 nginx 真正被加载的那份文件在哪个路径？"]},
      nb={"en": ["The old box still has a leftover nginx config at {alt}, nobody uses it."],
          "zh": ["旧机器上还留着一份没人用的 nginx 配置，在 {alt}。"]}),
    S("git_undo", "code", "coding", _pool(["git reset --soft HEAD~1"] * 3, ["git reset --soft HEAD~1"] * 3),
      who="assistant", cue=["git", "commit"],
      lead={"en": ["I committed to the wrong branch. How do I take back the last commit without losing my edits?"],
            "zh": ["提交到错的分支上了，怎么撤回最后一次 commit 但保留改动？"]},
      fact={"en": ["Run `{value}`: the commit is undone and your changes stay staged, then switch branches and commit "
                   "again."],
            "zh": ["执行 `{value}`：提交会撤销，改动还在暂存区，切到正确分支再提交就行。"]},
      q={"en": ["Which git command did you tell me for reverting a commit while keeping my work?"],
         "zh": ["你之前教我的，撤销上一次 commit 又不丢代码的那条命令是什么？"]}),
    S("port_cmd", "code", "coding", _same(["lsof -i :8080", "lsof -i :3000", "lsof -i :5432"]), who="assistant",
      lead={"en": ["Something is already listening on my dev port and the server won't start. How do I find out what?"],
            "zh": ["开发用的端口被占了，服务起不来，怎么看是谁占的？"]},
      fact={"en": ["To see what is holding the port, try `{value}` (or `ss -ltnp` on Linux) — it shows the PID, which "
                   "you can then kill."],
            "zh": ["查端口占用可以用 `{value}`（Linux 上也可以 `ss -ltnp`），能看到 PID，再 kill 掉就行。"]},
      q={"en": ["Which command did you recommend for seeing what process holds a port?"],
         "zh": ["查哪个进程霸着端口，你推荐我用的命令是？"]}),
    S("pinned_version", "code", "coding", _same(["2.7.4", "5.3.1", "1.4.52", "2.31.0", "1.26.4", "4.2.11"]),
      slots=["lib"], cue=["{lib}"],
      fact={"en": ["We pinned {lib} to {value} in requirements, the next minor release broke our serializers."],
            "zh": ["我们在 requirements 里把 {lib} 锁在了 {value}，下一个小版本把序列化搞坏了。"]},
      q={"en": ["Which {lib} version did we lock the project to?"], "zh": ["我们项目里 {lib} 固定用的是哪个版本？"]},
      nb={"en": ["The data team is still on {lib} {alt}, "
                 "ancient.",
                 "The new microservice template ships with {lib} {alt} by "
                 "default."], "zh": ["数据组那边 {lib} 还停在 {alt}，古董级别。",
                 "新的微服务模板默认带的是 {lib} {alt}。"]}),
    S("wifi", "code", "home", _same(["mango-rocket-42", "Tuesday!Blue77", "keepout_2024", "pinecone#19",
                                     "NoMoreBuffering8"]),
      old={"en": ["The Wi-Fi password at home is {old}, {partner} picked it."],
           "zh": ["家里 Wi-Fi 密码是 {old}，{partner}设的。"]},
      fact={"en": ["Changed the router password after the neighbour thing — it's {value} now."],
            "zh": ["因为邻居蹭网，我把路由器密码改了，现在是 {value}。"]},
      q={"en": ["What's the Wi-Fi code at our place now?"], "zh": ["我家无线网现在的密码是多少？"]}),
    S("branch", "code", "coding", _same(["feat/ledger-v2-migration", "chore/drop-legacy-auth", "db/split-orders-table",
                                         "feat/pg15-upgrade"]),
      cue=["branch", "分支"],
      fact={"en": ["I'm doing the migration work on a branch called {value}, don't let me forget to rebase it."],
            "zh": ["迁移的活我在 {value} 这个分支上做，提醒我记得 rebase。"]},
      q={"en": ["Which branch holds my database move work?"], "zh": ["我做数据库迁移用的是哪个分支？"]},
      nb={"en": ["{coworker} is doing her part of the migration on "
                 "{alt}."], "zh": ["{coworker}负责的那部分迁移在 {alt} 分支上。"]}),
    S("healthcheck", "code", "coding", _same(["30s", "45s", "20s", "60s"]),
      slots=["service"], cue=["{service}"],
      fact={"en": ["I bumped the healthcheck interval in docker-compose for {service} to {value}; the old 5s was "
                   "flapping."],
            "zh": ["{service} 的 docker-compose healthcheck 间隔我改成 {value} 了，之前 5s 老抖。"]},
      q={"en": ["How frequently is the container probe for {service} scheduled now?"],
         "zh": ["{service} 那个容器健康检查现在多久跑一次？"]},
      nb={"en": ["For the other containers the interval is still {alt}."], "zh": ["其他几个容器的间隔还是 {alt}。"]}),
    # ---------------------------------------------------------------- date
    S("tooth_appt", "date", "health", _date,
      fact={"en": ["Booked the wisdom-tooth extraction for {value}, 9:30 in the morning."],
            "zh": ["拔智齿约在{value}上午九点半。"]},
      q={"en": ["When's my appointment to get the tooth pulled?"], "zh": ["我去拔牙是哪天？"]},
      nb={"en": ["{partner} has a dental cleaning booked for {alt}.",
                 "My next regular check-up is on {alt}, I should move it."], "zh": ["{partner}约了{alt}去洗牙。",
                 "我下一次常规检查约在{alt}，可能要改时间。"]}),
    S("mom_birthday", "date", "family", _date, cue=["birthday", "生日"],
      fact={"en": ["Reminder for myself: Mom's birthday is {value}, and this year she wants a quiet dinner, nothing "
                   "fancy."],
            "zh": ["提醒一下自己：我妈生日是{value}，今年她说就想安安静静吃顿饭。"]},
      q={"en": ["When is my mother's birthday again?"], "zh": ["我妈妈生日是哪天来着？"]},
      nb={"en": ["{partner}'s mum has her birthday on {alt}, so that month is expensive."],
          "zh": ["{partner}他妈妈生日是{alt}，那个月开销好大。"]}),
    S("launch_deadline", "date", "work", _iso_date, cue=["{project}"],
      old={"en": ["The {project} launch deadline is {old}, no slack at all."],
           "zh": ["{project}上线的截止日期是{old}，一点余地都没有。"]},
      fact={"en": ["Good news, the launch got pushed: new date is {value}."],
            "zh": ["好消息，上线推迟了，新的日子定在{value}。"]},
      q={"en": ["When is the {project} release due now?"], "zh": ["{project}现在定的是哪天发布？"]}),
    S("flight_date", "date", "travel", _date, slots=["trip"], cue=["{trip}"],
      fact={"en": ["Flights to {trip} are booked: we leave on {value} and come back ten days later."],
            "zh": ["去{trip}的机票订好了，{value}出发，玩十天回来。"]},
      q={"en": ["What day do we fly out for the {trip} holiday?"], "zh": ["我们哪天飞{trip}？"]},
      nb={"en": ["{friend} is going to {trip} too, but she heads out on {alt}.",
                 "{partner} has a work trip on {alt}, so we have to plan around that."],
          "zh": ["{friend}也去{trip}，不过她是{alt}走。",
                 "{partner}{alt}要出差，我们得错开。"]}),
    S("anniversary", "date", "family", _date, cue=["{partner}", "anniversary", "纪念日"],
      fact={"en": ["Our anniversary is {value} — five years this time, so I want to plan something."],
            "zh": ["我们的纪念日是{value}，今年五周年，想好好准备一下。"]},
      q={"en": ["When do {partner} and I celebrate being together?", "What's the date of our anniversary?"],
         "zh": ["我和{partner}在一起的日子是哪天？", "我们的纪念日是几号？"]},
      nb={"en": ["{sister} and her husband's is {alt}, we always mix them up."],
          "zh": ["{sister}和她老公的纪念日是{alt}，老记混。"]}),
    S("visa", "date", "travel", _date, cue=["visa", "签证"],
      fact={"en": ["The visa interview is set for {value}, at the consulate downtown."],
            "zh": ["签证面签约在{value}，在市中心的领馆。"]},
      q={"en": ["When do I have to go in for the visa appointment?"], "zh": ["我签证面谈是什么时候？"]},
      nb={"en": ["{partner}'s visa interview is on {alt}."], "zh": ["{partner}的签证面签约在{alt}。"]}),
    S("wedding", "date", "family", _date, cue=["{friend2}"],
      fact={"en": ["{friend2} is getting married on {value} out in the countryside, and I'm in the bridal party!"],
            "zh": ["{friend2}{value}结婚，在郊区办，让我去当伴娘团/伴郎团的一员！"]},
      q={"en": ["When is {friend2}'s wedding?"], "zh": ["{friend2}的婚礼是哪天？"]},
      nb={"en": ["{cousin} is also tying the knot, on {alt}, so it's a busy year."],
          "zh": ["{cousin}也是今年结婚，定在{alt}，今年份子钱要爆了。"]}),
    # ---------------------------------------------------------------- preference
    S("answer_style", "preference", "coding", _pool(["x"] * 3, ["x"] * 3),
      fact={"en": ["Small request: when you answer coding questions, just give me the code first and the explanation "
                   "after, short bullet points, no emojis."],
            "zh": ["提个小要求：回答代码问题的时候先给代码，再简单解释，用要点列一下，别加表情。"]},
      q={"en": ["How did I want your replies laid out for programming stuff?"],
         "zh": ["我让你回答编程相关问题时按什么格式来？"]},
      nb={"en": ["For emails, I like a fuller draft that I can edit down myself."],
          "zh": ["写邮件的话我喜欢你给完整一点的稿子，我自己删。"]}),
    S("hated_food", "preference", "food", _pool(["cilantro", "olives", "blue cheese", "raisins", "mushrooms"],
                                                ["香菜", "葱", "蒜苗", "芹菜", "茴香"]),
      fact={"en": ["Please never suggest recipes with {value}, it tastes like soap to me. Spicy is totally fine "
                   "though."],
            "zh": ["以后推荐菜谱千万别放{value}，我吃着像肥皂味，辣倒是没问题。"]},
      q={"en": ["Which ingredient do I refuse to eat?", "What should you leave out of any recipe for me?"],
         "zh": ["我吃东西最排斥哪样？", "给我推荐菜谱时要避开什么？"]}, cue=["recipe", "菜谱"],
      nb={"en": ["{partner} hates {alt}, so leave it out when we cook together."],
          "zh": ["{partner}不吃{alt}，一起做饭的时候记得别放。"]}),
    S("coffee_order", "preference", "food", _pool(["large oat flat white", "iced americano with an extra shot",
                                                   "cortado", "decaf cappuccino"],
                                                  ["冰美式加浓", "燕麦拿铁少冰", "生椰拿铁", "热美式不加糖"]),
      fact={"en": ["My usual order is a {value}, and I'm annoyingly loyal to it."],
            "zh": ["我一般都点{value}，雷打不动。"]},
      q={"en": ["What do I normally get at the coffee shop?"], "zh": ["我去咖啡店一般喝什么？"]},
      nb={"en": ["{coworker} always gets a {alt} and judges mine.",
                 "When I'm at {friend}'s place she makes me a {alt}, which is nice for a "
                 "change."], "zh": ["{coworker}每次都点{alt}，还嫌弃我的。",
                 "去{friend}家她会给我做{alt}，偶尔换换口味也不错。"]}),
    S("plane_seat", "preference", "travel", _pool(["aisle seat", "window seat", "aisle seat"],
                                                  ["靠过道的位置", "靠窗的位置", "靠过道的位置"]),
      fact={"en": ["For flights, always book me an {value} — I get up a lot and hate climbing over people."],
            "zh": ["订机票帮我选{value}，我老起来走动，不想挤别人。"]},
      q={"en": ["Where on the plane do I like to sit?", "Which seat do I want when I fly?"],
         "zh": ["坐飞机我喜欢选什么座位？", "帮我订机票时该选哪种座？"]},
      nb={"en": ["{partner} always wants the {alt}, naturally."], "zh": ["{partner}就喜欢{alt}，我们俩刚好互补。"]}),
    S("book_taste", "preference", "books",
      _pair_pool([("slow, idea-heavy science fiction", "romance or thrillers"),
                  ("historical fiction with big family sagas", "fantasy"),
                  ("literary memoirs", "crime novels")],
                 [("节奏慢、点子多的硬科幻", "言情和悬疑"), ("历史小说，尤其是家族史那种", "玄幻"),
                  ("非虚构和人物传记", "推理小说")]),
      fact={"en": ["Book-wise, I love {value}, but I just can't get into {value2}."],
            "zh": ["看书的话，我喜欢{value}，{value2}真的看不下去。"]},
      q={"en": ["What sort of books do I go for?"], "zh": ["我偏爱哪类书？"]},
      nb={"en": ["{friend} only reads {alt}, we never agree on book club picks."],
          "zh": ["{friend}只看{alt}，读书会选书我俩从来谈不拢。"]}),
    S("workout_time", "preference", "fitness", _pool(["6am", "5:30am", "6:30am"],
                                                     ["早上六点", "早上五点半", "早上六点半"]),
      fact={"en": ["I'm a {value} workout person — if I leave it to the evening it never happens."],
            "zh": ["我只能{value}练，拖到晚上就一定不会去。"]},
      q={"en": ["When in the day do I prefer to exercise?", "What time do I like to do my workout?"],
         "zh": ["我一般喜欢在一天里什么时候锻炼？"]}, cue=["workout"],
      nb={"en": ["{friend} only trains late at night, which I don't "
                 "get."], "zh": ["{friend}都是半夜去练，我真不理解。"]}),
    S("director", "preference", "movies", _pool(["Denis Villeneuve", "Hayao Miyazaki", "Greta Gerwig", "Bong Joon-ho",
                                                 "Wes Anderson"],
                                                ["宫崎骏", "姜文", "是枝裕和", "诺兰", "王家卫"]),
      fact={"en": ["Honestly I'll watch any film by {value}, but please don't recommend horror, I can't sleep after."],
            "zh": ["说实话{value}的片我都愿意看，但别给我推恐怖片，看完睡不着。"]},
      q={"en": ["Which director's films do I always enjoy?"], "zh": ["哪个导演的作品我基本都爱看？"]},
      nb={"en": ["{partner} is obsessed with {alt} films, we take turns choosing."],
          "zh": ["{partner}是{alt}的死忠粉，我们轮流选片。"]}),
    # ---------------------------------------------------------------- event
    S("lost_wallet", "event", "family", _pool(["number 12 bus", "tram to Central", "airport shuttle", "commuter train"],
                                              ["12 路公交", "地铁 2 号线", "机场大巴", "城际列车"]),
      fact={"en": ["Worst morning: left my wallet on the {value} and only noticed at the office. Someone handed it in, "
                   "thank god."],
            "zh": ["今天早上倒霉死了，钱包落在{value}上，到公司才发现，幸好有人交到了失物招领。"]},
      q={"en": ["Where did I leave my purse that time a stranger returned it?"], "zh": ["我那次丢钱包是丢在哪儿了？"]},
      nb={"en": ["{partner} once lost his keys on the {alt}, so it runs in the family."],
          "zh": ["{partner}之前也把钥匙丢在{alt}上过。"]}),
    S("promotion", "event", "work", _pool(["senior engineer", "team lead", "staff analyst", "principal designer"],
                                          ["高级工程师", "组长", "资深分析师", "技术经理"]),
      fact={"en": ["Got the news today — the promotion came through, I'm {value} starting next quarter!"],
            "zh": ["今天收到通知，下个季度我升{value}了！"]},
      q={"en": ["What new title am I getting?", "What title does my promotion give me?"],
         "zh": ["我这次晋升后的新职位是什么？"]}, cue=["promotion"],
      nb={"en": ["{coworker} was hoping for {alt} but didn't get it this "
                 "cycle.",
                 "{coworker2} made {alt} last year, he said the first months were "
                 "rough."], "zh": ["{coworker}这轮想升{alt}，没成。",
                 "{coworker2}去年升了{alt}，说头几个月压力很大。"]}),
    S("car_scrape", "event", "shopping", _pool(["Westfield", "IKEA", "Whole Foods", "Costco"],
                                               ["万达广场", "宜家", "山姆", "盒马"]),
      fact={"en": ["Someone scraped the car in the {value} parking garage yesterday and just drove off. Rear bumper is "
                   "a "
                   "mess."],
            "zh": ["昨天车停在{value}的停车场被人蹭了，对方直接开走了，后保险杠惨不忍睹。"]},
      q={"en": ["Where was my car damaged in that hit-and-run?"], "zh": ["我的车上次是在哪被刮的？"]},
      nb={"en": ["{brother}'s car got dinged outside {alt} last year "
                 "too."], "zh": ["去年{brother}的车在{alt}门口也被刮过。"]}),
    S("outage", "event", "work", _pool(["an expired TLS certificate on the internal gateway",
                                        "a cron job that truncated the sessions table",
                                        "a DNS change nobody announced", "the disk filling up with debug logs"],
                                       ["内网网关的 TLS 证书过期", "一个定时任务把 sessions 表清空了",
                                        "有人改了 DNS 没通知", "调试日志把磁盘写满"]),
      fact={"en": ["Postmortem done: the outage on Tuesday was caused by {value}. Embarrassing but at least we know."],
            "zh": ["复盘结束了，周二那次故障是{value}导致的，丢人但总算搞清楚了。"]},
      q={"en": ["What turned out to be the root of that big "
                "incident?"], "zh": ["那次线上事故最后查出来的原因是什么？"]},
      nb={"en": ["We had a smaller blip back in March, that one was "
                 "{alt}."], "zh": ["三月份也出过一次小抖动，那次是{alt}。"]}),
    S("driving_test", "event", "study", _pool(["second", "third", "fourth"], ["二", "三", "四"]),
      fact={"en": ["I passed my driving test on the {value} attempt!! Parallel parking was perfect for once."],
            "zh": ["驾照科目三终于过了，第{value}次！这次侧方停车一把进。"]},
      q={"en": ["How many tries did it take me to get my licence?"], "zh": ["我考驾照那次考了几回才过？"]},
      nb={"en": ["{brother} needed a {alt} go, so I'm not the "
                 "worst."], "zh": ["{brother}当年考到第{alt}次才过，我还不算最差。"]}),
    S("food_poisoning", "event", "health", _pool(["chicken shawarma", "oysters", "sushi rolls", "fish tacos"],
                                                 ["烤生蚝", "凉皮", "麻辣小龙虾", "寿司"]),
      fact={"en": ["Pretty sure the {value} from that new food truck gave me food poisoning, I was up all night."],
            "zh": ["应该是那家新开的小摊的{value}让我食物中毒了，折腾了一晚上。"]},
      q={"en": ["What did I eat that made me sick?", "What food gave me that awful night?"],
         "zh": ["上次吃坏肚子是吃了什么？", "那次食物中毒是吃了啥？"]}, cue=["食物中毒"],
      nb={"en": ["{friend} got sick from {alt} at a street festival last year, so now she's "
                 "paranoid."], "zh": ["{friend}去年也吃{alt}拉过肚子。"]}),
    S("concert", "event", "movies", _pool(["Arctic Monkeys", "Phoebe Bridgers", "Radiohead", "Khruangbin", "Coldplay"],
                                          ["五月天", "陈奕迅", "周杰伦", "草东没有派对", "告五人"]),
      fact={"en": ["We went to the {value} concert last night, they played for almost three hours!"],
            "zh": ["昨晚去看了{value}的演唱会，唱了快三个小时！"]},
      q={"en": ["Which band's show did we go to?", "Whose concert did we see that night?"],
         "zh": ["我们那次去听的是谁的现场？", "我们那次去看的是谁的演唱会？"]}, cue=["concert", "演唱会"],
      nb={"en": ["{sister} has tickets for {alt} next month.",
                 "{friend} saw {alt} in the summer and hasn't stopped talking about "
                 "it."], "zh": ["{sister}抢到了下个月{alt}的票。",
                 "{friend}夏天去看了{alt}，到现在还念念不忘。"]}),
]

# Replies that fit a particular fact better than the topic's generic reactions (used after the fact, its
# outdated version and its neighbours, so they must suit all three).
SPEC_REPLIES = {
    "car_scrape": {"en": ["Ugh, that's infuriating. Did the garage have cameras? Worth asking before the footage is "
                          "deleted.", "That's so annoying. Take photos for the insurance claim while it's fresh."],
                   "zh": ["太气人了！停车场有监控的话赶紧去调，"
                          "时间长了会被覆盖。", "好烦啊，先拍照留证据，报保险的时候用得上。"]},
    "food_poisoning": {"en": ["Oof, that sounds miserable. Small sips of water and rest — see a doctor if it lasts.",
                              "Food poisoning is the worst. Hope you're back on your feet soon."],
                       "zh": ["听着就难受，多喝点淡盐水，好好休息，"
                              "严重的话去医院。", "食物中毒太遭罪了，快点好起来。"]},
    "lost_wallet": {"en": ["Phew, what a relief that it came back! Worth checking nothing's missing from it.",
                           "That's a scary feeling. Glad it turned up."],
                    "zh": ["还好找回来了！检查一下里面的卡和证件都在不在。", "吓死了吧，幸好有好心人。"]},
    "outage": {"en": ["At least the root cause is clear. Adding an alert for it would stop a repeat.",
                      "Those are the worst kind of incidents — glad the postmortem pinned it down."],
               "zh": ["至少根因找到了，加个告警能防止再发生。", "这种事故最折腾了，复盘清楚就好。"]},
    "rent": {"en": ["That's a noticeable jump. Might be worth checking what similar places go for nearby.",
                    "Noted — I'll use that number if we go over the budget again."],
             "zh": ["涨得不少啊，可以看看附近同类房子的价格，有底气跟房东谈。", "记下了，之后算预算的时候按这个来。"]},
    "promotion": {"en": ["Congratulations!! That's well deserved.", "That's huge, congrats! Time to celebrate."],
                  "zh": ["恭喜恭喜！实至名归！", "太棒了，必须庆祝一下！"]},
    "driving_test": {"en": ["Congrats!! Persistence pays off.", "Amazing — enjoy the freedom!"],
                     "zh": ["恭喜！坚持就是胜利！", "太好了，以后出门方便多了！"]},
    "concert": {"en": ["That sounds like an amazing night!", "Three hours, wow. Did they play your favourite?"],
                "zh": ["听起来超值！", "快三个小时，太良心了，有唱你最喜欢的那首吗？"]},
    "friend_baby": {"en": ["Aww, congratulations to them!", "That's such lovely news."],
                    "zh": ["恭喜恭喜！太好了！", "好消息！替他们开心。"]},
    "new_pet": {"en": ["Aww, welcome to the family, little one!", "That's adorable. How is your other pet taking it?"],
                "zh": ["好可爱！欢迎新成员～", "太萌了，家里的老成员接受它了吗？"]},
    "sister_partner": {"en": ["Sounds like he made a good first impression!", "That's sweet, glad it went well."],
                       "zh": ["听起来第一印象不错嘛！", "挺好的，见家长顺利就好。"]},
    "half_marathon": {"en": ["That's a great time — well done!", "Huge effort. Make sure you recover properly."],
                      "zh": ["成绩很棒，恭喜！", "辛苦了，这几天好好恢复。"]},
    "ielts": {"en": ["Nice, that's a solid result!", "Well done — writing is the hardest part for most people."],
              "zh": ["不错哦，恭喜！", "写作本来就最难提分，已经很好了。"]},
    "moved_city": {"en": ["Big change! Let me know if you want help with a moving checklist.",
                          "Moving is exhausting — good luck with the boxes."],
                   "zh": ["变化好大！需要的话我帮你列个搬家清单。", "搬家最累了，辛苦了。"]},
    "visa": {"en": ["Good luck! Bring printed copies of everything, they love paperwork.",
                     "Noted — want a checklist of documents to bring?"],
             "zh": ["祝顺利！材料都打印一份带上，领馆很看重纸质材料。", "好的，要不要我帮你列个材料清单？"]},
    "tooth_appt": {"en": ["Good luck — plan for a soft-food day or two afterwards.", "Noted. Take the afternoon easy."],
                   "zh": ["加油！拔完那两天吃点软的流食。", "好的，拔完记得冰敷，别用吸管。"]},
    "new_manager": {"en": ["Changes like that take some getting used to. Maybe set up an early 1:1 to align.",
                           "Noted — good to know who you're working with."],
                    "zh": ["换领导需要适应一阵，可以早点约个一对一对齐一下预期。", "了解，记下了。"]},
}
for _spec in SPECS:
    _spec["reply"] = SPEC_REPLIES.get(_spec["key"])
