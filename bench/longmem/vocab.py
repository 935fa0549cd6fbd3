"""Word pools used to fill template slots and to build personas.

Pools are keyed by language ("en", "zh").  Mixed (bilingual) users draw people's names from ``MIXED_FEMALE`` and
``MIXED_MALE`` (English nicknames, as many bilingual Chinese speakers use them in both languages) so that a name
said in a Chinese message can be asked about in English and vice versa.
"""

EN_FEMALE = ["Mei", "Hannah", "Priya", "Sofia", "Chloe", "Naomi", "Grace", "Lena", "Maya", "Zoe", "Ruth", "Iris",
             "Nadia", "Elena", "Tara", "Julia", "Anika", "Rosa", "Leah", "Clara", "Ines", "Freya", "Dana", "Molly"]
EN_MALE = ["Ben", "Marcus", "Daniel", "Omar", "Leo", "Sam", "Jonah", "Felix", "Ravi", "Theo", "Owen", "Eli", "Hugo",
           "Victor", "Nate", "Tomas", "Aaron", "Kofi", "Luis", "Isaac", "Declan", "Mateo", "Pavel", "Gus"]
ZH_FEMALE = ["小雨", "王婷", "李娜", "晓雯", "佳佳", "周敏", "孙悦", "何静", "黄蕾", "郑雪", "宋佳", "小米", "徐可",
             "蒋欣", "曹颖", "韩梅"]
ZH_MALE = ["刘洋", "老周", "张磊", "阿杰", "赵鹏", "小胖", "林峰", "吴昊", "老陈", "阿光", "方圆", "梁宇", "彭博",
           "陈晨"]
MIXED_FEMALE = ["Vivian", "Cici", "Amy", "Tina", "Coco", "Winnie", "Joyce", "Bella", "Yoyo", "Elaine", "Lily",
                "Angela"]
MIXED_MALE = ["Kevin", "Jason", "Eric", "Jerry", "Alan", "Frank", "Vincent", "Derek", "Max", "Ryan", "Tony"]

CITIES = {
    "en": ["Berlin", "Munich", "Lisbon", "Toronto", "Seattle", "Austin", "Melbourne", "Dublin", "Amsterdam",
           "Portland", "Denver", "Edinburgh", "Vancouver", "Boston", "Chicago", "Copenhagen", "Madrid", "Zurich"],
    "zh": ["杭州", "成都", "深圳", "南京", "苏州", "武汉", "西安", "厦门", "青岛", "长沙", "重庆", "天津", "大连",
           "昆明", "合肥", "宁波"],
}
# bilingual city pairs for mixed users, so the same persona city can be written in either language
MIXED_CITIES = [("Shanghai", "上海"), ("Singapore", "新加坡"), ("Shenzhen", "深圳"), ("Vancouver", "温哥华"),
                ("Sydney", "悉尼"), ("Hong Kong", "香港"), ("Beijing", "北京"), ("Toronto", "多伦多")]

JOBS = {
    "en": ["backend engineer", "data analyst", "product designer", "nurse", "high-school teacher", "PhD student",
           "DevOps engineer", "marketing manager", "mobile developer", "architect", "ML engineer", "accountant"],
    "zh": ["后端开发", "数据分析师", "产品经理", "护士", "高中老师", "研究生", "运维工程师", "UI 设计师", "前端开发",
           "算法工程师", "会计", "测试工程师"],
}
MIXED_JOBS = [("backend engineer", "后端开发"), ("data scientist", "数据科学家"), ("product manager", "产品经理"),
              ("SRE", "SRE"), ("iOS developer", "iOS 开发"), ("PhD student", "博士生")]

PET_KINDS = {"en": ["dog", "cat", "rabbit", "corgi", "tabby cat", "golden retriever"],
             "zh": ["狗", "猫", "兔子", "柯基", "橘猫", "金毛"]}
PET_KINDS_MIXED = [("dog", "狗"), ("cat", "猫"), ("corgi", "柯基"), ("ragdoll cat", "布偶猫")]
NEW_PET_KINDS = {"en": ["kitten", "puppy", "hamster"], "zh": ["小猫", "小狗", "仓鼠"]}
NEW_PET_KINDS_MIXED = [("kitten", "小猫"), ("puppy", "小狗"), ("hamster", "仓鼠")]

PROJECTS = ["billing-service", "ledger-api", "pulse-dashboard", "orchard", "relay-gateway", "atlas-sync",
            "harbor-etl", "nimbus-web", "quill-cms", "beacon-notify", "tandem-auth", "lumen-search"]

SLOT_POOLS = {
    "en": {
        "dish": ["shakshuka", "chicken tikka masala", "mushroom risotto", "beef chili", "pad thai", "lasagna",
                 "banana bread", "miso salmon", "carbonara", "lentil soup", "fish tacos", "ramen from scratch",
                 "sourdough", "tomato soup", "stir-fried noodles", "roast chicken", "dumplings", "granola"],
        "ingredient": ["leeks", "tofu", "half a pumpkin", "chickpeas", "frozen shrimp", "spinach", "feta",
                       "leftover rice", "eggplant", "ground turkey", "coconut milk", "sweet potatoes", "kale"],
        "dest": ["Lisbon", "Kyoto", "Mexico City", "Iceland", "Seoul", "the Dolomites", "Vienna", "Porto",
                 "Hanoi", "Scotland", "Crete", "Montreal", "Taipei", "Cape Town"],
        "book": ["Project Hail Mary", "The Remains of the Day", "Educated", "Thinking, Fast and Slow", "Piranesi",
                 "The Three-Body Problem", "Atomic Habits", "Klara and the Sun", "Sapiens", "Dune",
                 "The Overstory", "Designing Data-Intensive Applications", "A Gentleman in Moscow"],
        "movie": ["Past Lives", "Dune: Part Two", "Everything Everywhere All at Once", "Oppenheimer", "Arrival",
                  "Spirited Away", "The Grand Budapest Hotel", "Parasite", "Interstellar", "Aftersun"],
        "show": ["Severance", "The Bear", "Slow Horses", "Shogun", "Succession", "Only Murders in the Building",
                 "Fleabag", "The Last of Us", "Andor", "Abbott Elementary"],
        "exercise": ["deadlifts", "squats", "pull-ups", "interval runs", "kettlebell swings", "bench press",
                     "hill sprints", "yoga flows", "rowing", "planks"],
        "tool": ["Docker", "Kubernetes", "Terraform", "Postgres", "Redis", "GitHub Actions", "nginx", "Kafka",
                 "Grafana", "pytest", "webpack", "Celery"],
        "pl": ["Python", "Go", "TypeScript", "Rust", "Kotlin", "SQL"],
        "func": ["parse_invoice", "load_config", "retry_with_backoff", "build_index", "sync_accounts",
                 "normalize_email", "fetch_rates", "render_report", "validate_payload", "flush_cache"],
        "key": ["timeout_ms", "pool_size", "batch_size", "log_level", "cache_ttl", "worker_concurrency",
                "max_connections", "read_replica_url"],
        "err": ["a 502 from the gateway", "an OOMKilled pod", "a deadlock in the migrations", "a flaky CI job",
                "a CORS error", "a null pointer in the parser", "a timeout on the payment call"],
        "gadget": ["noise-cancelling headphones", "a standing desk", "an e-reader", "a robot vacuum",
                   "a mechanical keyboard", "an air fryer", "a smartwatch", "a 4K monitor", "a new phone"],
        "subject": ["statistics", "Spanish", "linear algebra", "German", "machine learning", "accounting",
                    "music theory", "Japanese", "organic chemistry"],
        "app": ["Anki", "Notion", "Duolingo", "Todoist", "Obsidian", "Strava", "YNAB", "Google Sheets"],
        "weekday": ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"],
        "num": ["two", "three", "four", "five", "a couple of", "a few"],
        "room": ["kitchen", "bathroom", "balcony", "hallway", "spare room", "living room"],
        "drink": ["oat flat white", "green tea", "cold brew", "matcha latte", "chai"],
        "sport": ["climbing", "tennis", "swimming", "cycling", "badminton", "running", "five-a-side football"],
        "service": ["checkout", "auth", "search", "notifications", "reporting", "ingest"],
        "restaurant": ["Bella Nonna", "The Copper Pot", "Little Saigon Kitchen", "Casa Lupita", "Golden Lotus",
                       "Smoke & Barrel", "Osteria Nove", "Blue Door Bistro", "Taqueria El Sol", "Pho Hoa"],
    },
    "zh": {
        "dish": ["红烧肉", "番茄炒蛋", "酸菜鱼", "麻婆豆腐", "可乐鸡翅", "清蒸鲈鱼", "回锅肉", "宫保鸡丁", "土豆炖牛肉",
                 "蛋炒饭", "糖醋排骨", "凉拌黄瓜", "葱油拌面", "水煮肉片", "咖喱鸡", "韭菜盒子", "小馄饨", "蒸鸡蛋羹"],
        "ingredient": ["半颗白菜", "豆腐", "两个土豆", "一盒虾仁", "西兰花", "剩米饭", "茄子", "五花肉", "香菇",
                       "鸡胸肉", "年糕", "一把韭菜", "冬瓜"],
        "dest": ["大理", "京都", "成都", "新疆", "曼谷", "三亚", "首尔", "青岛", "西双版纳", "厦门", "东京",
                 "张家界", "清迈", "哈尔滨"],
        "book": ["《三体》", "《活着》", "《置身事内》", "《人类简史》", "《被讨厌的勇气》", "《明朝那些事儿》",
                 "《长安的荔枝》", "《百年孤独》", "《刻意练习》", "《额尔古纳河右岸》", "《我与地坛》",
                 "《深入理解计算机系统》", "《毛泽东选集》"],
        "movie": ["《流浪地球2》", "《让子弹飞》", "《你好，李焕英》", "《奥本海默》", "《千与千寻》", "《寄生虫》",
                  "《星际穿越》", "《繁花》", "《封神第一部》", "《热辣滚烫》"],
        "show": ["《漫长的季节》", "《狂飙》", "《繁花》", "《庆余年》", "《隐秘的角落》", "《甄嬛传》", "《长相思》",
                 "《我的阿勒泰》"],
        "exercise": ["深蹲", "硬拉", "引体向上", "跳绳", "间歇跑", "平板支撑", "卧推", "HIIT", "普拉提", "游泳"],
        "tool": ["Docker", "k8s", "Nginx", "MySQL", "Redis", "Jenkins", "Kafka", "Grafana", "pytest", "Vue",
                 "Spring Boot", "Celery"],
        "pl": ["Python", "Go", "Java", "TypeScript", "Rust", "SQL"],
        "func": ["parse_order", "load_config", "retry_with_backoff", "build_index", "sync_user_info",
                 "calc_discount", "fetch_rates", "export_excel", "check_sign", "flush_cache"],
        "key": ["timeout_ms", "pool_size", "batch_size", "log_level", "cache_ttl", "worker_concurrency",
                "max_connections", "slave_url"],
        "err": ["网关报 502", "Pod 被 OOMKilled", "数据库死锁", "CI 偶发失败", "跨域报错", "空指针异常",
                "支付接口超时"],
        "gadget": ["降噪耳机", "升降桌", "Kindle", "扫地机器人", "机械键盘", "空气炸锅", "Apple Watch",
                   "4K 显示器", "新手机", "洗碗机"],
        "subject": ["高数", "英语口语", "线性代数", "日语", "机器学习", "注会", "考研政治", "雅思写作", "Python"],
        "app": ["Anki", "Notion", "多邻国", "滴答清单", "Obsidian", "Keep", "随手记", "飞书文档"],
        "weekday": ["周一", "周二", "周三", "周四", "周五", "周六", "周日"],
        "num": ["两", "三", "四", "五", "好几"],
        "room": ["厨房", "卫生间", "阳台", "玄关", "次卧", "客厅"],
        "drink": ["冰美式", "燕麦拿铁", "柠檬茶", "生椰拿铁", "乌龙茶"],
        "sport": ["羽毛球", "游泳", "骑行", "飞盘", "跑步", "攀岩", "乒乓球"],
        "service": ["订单", "鉴权", "搜索", "消息推送", "报表", "数据接入"],
        "restaurant": ["巷子里烤肉", "阿婆酸菜鱼", "蜀大侠", "外婆家", "胖哥俩肉蟹煲", "陶陶居", "南京大牌档",
                       "老街粥铺", "湘里人家", "一风堂"],
    },
}
