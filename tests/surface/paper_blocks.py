# ruff: noqa: E501 -- the blocks keep the model's own long lines verbatim
"""The ms-using code blocks of the paper's Appendix D, as the model wrote them.

Source: ``paper/000_a710939a141096ad.txt``, Code Blocks 1-29. The extracted text lost its
whitespace and normalised quotes; the blocks below restore spacing and ASCII quotes and change
nothing else. Two reconstructions are noted where the text is ambiguous:

- Blocks 20 and 22 concatenate adjacent string literals; a space ends each literal so the SQL
  words stay apart (the original ran, so it had them).
- Block 22 is rerun by the model in steps 3-5 "changing only the OFFSET" and Block 23 reads
  ``rows3``, ``rows4``, ``rows5``: those reruns are Block 22 with OFFSET 1000/2000/3000 bound to
  ``rows3``/``sess3``, ``rows4``/``sess4``, ``rows5``/``sess5``.

The paper's ``kind`` is ``'conversation'``, the kind our importers write, so no kind needed
adapting.
"""

from __future__ import annotations

BLOCK_22 = """\
rows2 = ms.sql_query(
    "SELECT seq, step_index, json_extract(metadata, '$.date') AS date, role, substr(content, 1, 180) AS preview "
    "FROM hist.conversation_history WHERE kind='conversation' "
    "AND json_extract(metadata, '$.date') BETWEEN '2023-04-13' AND '2023-04-25' "
    "ORDER BY msg_index LIMIT 1000 OFFSET 0")
print(len(rows2))
rows2 = list(rows2)
from collections import defaultdict
sess2 = defaultdict(lambda: {'dates': set(), 'n': 0})
for r in rows2:
    sess2[r['step_index']]['dates'].add(r['date'])
    sess2[r['step_index']]['n'] += 1
for s in sorted(sess2):
    print(s, sorted(sess2[s]['dates']), sess2[s]['n'])
print(rows2[-1]['seq'], rows2[-1]['date'])
"""


def _rerun_22(page: int) -> str:
    return (
        BLOCK_22.replace("rows2", f"rows{page + 2}")
        .replace("sess2", f"sess{page + 2}")
        .replace("OFFSET 0", f"OFFSET {page * 1000}")
    )


BLOCKS: list[tuple[str, str]] = [
    (
        "1",
        """\
hits = ms.search("sprint 2024-11-05", scope='task', k=20)
for h in hits:
    print(h["seq"], h["step_index"], h["snippet"][:200])
""",
    ),
    (
        "2",
        """\
rows = ms.sql_query(
    "SELECT seq, role, content FROM hist.conversation_history WHERE kind='conversation' AND step_index=42 ORDER BY msg_index"
)
for r in rows:
    print(f"seq={r['seq']} role={r['role']}: {r['content'][:300]}")
    print("---")
""",
    ),
    (
        "3",
        """\
for r in rows:
    if r['role'] == 'user':
        print(f"seq={r['seq']}: {r['content'][:200]}")
        print("---")
""",
    ),
    (
        "4",
        """\
for r in rows:
    if r['role'] == 'user' and r['seq'] >= 8100:
        content = r['content']
        print(f"seq={r['seq']}: {content[:250]}")
        print("---")
""",
    ),
    (
        "5",
        """\
hits = ms.search("Pamela vendor", scope='task', k=20)
for h in hits:
    print(h["seq"], h["step_index"], h["snippet"][:150])
""",
    ),
    (
        "6",
        """\
hits2 = ms.search("Pamela didn't OR wasn't OR never OR not", scope='task', k=20)
for h in hits2:
    print(h["seq"], h["step_index"], h["snippet"][:150])
""",
    ),
    (
        "7",
        """\
rows = ms.expand([8867])
for r in rows:
    print(r["seq"], r["role"])
    print(r["content"][:2000])
    print("---")
""",
    ),
    (
        "8",
        """\
rows = ms.sql_query("SELECT seq, role, content FROM hist.conversation_history WHERE kind='conversation' AND step_index=37 ORDER BY seq LIMIT 30")
for r in rows:
    print(f"seq {r['seq']} [{r['role']}]: {r['content'][:200]}")
    print("---")
""",
    ),
    (
        "9",
        """\
rows = ms.expand([16900, 16902])
for r in rows:
    print(f"seq {r['seq']} [{r['role']}]:")
    print(r["content"][:600])
    print("---")
""",
    ),
    (
        "10",
        """\
rows = ms.sql_query("SELECT seq, role, content FROM hist.conversation_history WHERE kind='conversation' AND step_index=73 AND seq BETWEEN 16890 AND 16910 ORDER BY seq")
for r in rows:
    print(f"seq {r['seq']} [{r['role']}]: {r['content'][:300]}")
    print("---")
""",
    ),
    (
        "11",
        """\
rows = ms.sql_query("SELECT seq, role, content FROM hist.conversation_history WHERE kind='conversation' AND step_index=37 AND seq BETWEEN 8867 AND 8870 ORDER BY seq")
for r in rows:
    print(f"seq {r['seq']} [{r['role']}]: {r['content'][:500]}")
    print("---")
""",
    ),
    (
        "12",
        """\
rows = ms.expand([7496, 8434])
for r in rows:
    print(f"seq {r['seq']} [{r['role']}]: {r['content'][:400]}")
    print("---")
""",
    ),
    (
        "13",
        """\
hits3 = ms.search("Pamela misunderstanding OR correction OR didn't OR wasn't", scope='task', k=15, seq_range=(16900, 23716))
for h in hits3:
    print(h["seq"], h["step_index"], h["snippet"][:200])
""",
    ),
    (
        "14",
        """\
hits = []
for q in ["map route", "Google Maps", "Roadtrippers", "mapping tool", "app route", "map out"]:
    hits += ms.search(q, scope='task', k=10)
seen = set()
for h in hits:
    if h["seq"] not in seen:
        seen.add(h["seq"])
        print(h["seq"], h["step_index"], h.get("snippet", "")[:150])
        print("---")
""",
    ),
    (
        "15",
        """\
rows = ms.expand([16614])
for r in rows:
    print(r["seq"], r["content"][:500])
    print("---")
""",
    ),
    (
        "16",
        """\
hits2 = []
for q in ["I'll use", "I prefer", "my favorite", "I've been using", "I use"]:
    hits2 += ms.search(f"{q} map", scope='task', k=10)
hits3 = ms.search("Roadtrippers route plan", scope='task', k=15)
seen2 = set()
for h in hits2 + hits3:
    if h["seq"] not in seen2:
        seen2.add(h["seq"])
        print(h["seq"], h["step_index"], h.get("snippet", "")[:160])
        print("---")
""",
    ),
    (
        "17",
        """\
hits4 = ms.search("map route plan", seq_range=(18323, 22716), scope='task', k=20)
for h in hits4:
    if h.get("role") == "user":
        print(h["seq"], h["step_index"], h.get("snippet", "")[:180])
        print("---")
""",
    ),
    (
        "18",
        """\
hits5 = ms.search("Google Maps Roadtrippers map out", scope='task', k=15)
for h in hits5:
    if h.get("role") == "user":
        print(h["seq"], h["step_index"], h.get("snippet", "")[:200])
        print("---")
print("\\n=== Session 1 user turns about Roadtrippers ===")
rows_s1 = ms.sql_query("SELECT seq, role, content FROM hist.conversation_history WHERE kind='conversation' AND step_index=1 AND role='user' AND content LIKE '%Roadtrippers%' ORDER BY msg_index LIMIT 5")
for r in rows_s1:
    print(r["seq"], r["content"][:300])
    print("---")
""",
    ),
    (
        "19",
        """\
rows_s100 = ms.sql_query("SELECT seq, role, content FROM hist.conversation_history WHERE kind='conversation' AND step_index=100 ORDER BY msg_index LIMIT 10")
for r in rows_s100:
    print(r["seq"], r["role"], r["content"][:250])
    print("---")
""",
    ),
    (
        "20",
        """\
rows = ms.sql_query(
    "SELECT seq, step_index, json_extract(metadata, '$.date') AS date, role, headline, substr(content, 1, 200) AS preview "
    "FROM hist.conversation_history WHERE kind='conversation' "
    "AND json_extract(metadata, '$.date') BETWEEN '2023-04-08' AND '2023-04-25' "
    "ORDER BY msg_index")
print(len(rows))
for r in rows:
    print(r['seq'], r['step_index'], r['date'], r['role'], (r['preview'] or '')[:120].replace('\\n', ' '))
""",
    ),
    (
        "21",
        """\
rows_all = list(rows)
print(len(rows_all), rows_all[0]['seq'], rows_all[-1]['seq'], rows_all[-1]['date'])
from collections import defaultdict
sess = defaultdict(lambda: {'dates': set(), 'roles': 0})
for r in rows_all:
    sess[r['step_index']]['dates'].add(r['date'])
    sess[r['step_index']]['roles'] += 1
for s in sorted(sess):
    print(s, sorted(sess[s]['dates']), sess[s]['roles'])
""",
    ),
    ("22", BLOCK_22),
    ("22+1000", _rerun_22(1)),
    ("22+2000", _rerun_22(2)),
    ("22+3000", _rerun_22(3)),
    (
        "23",
        """\
all_turns = {}
for coll in [rows_all, rows2, rows3, rows4, rows5]:
    for r in coll:
        all_turns[r['seq']] = r
merged = [all_turns[k] for k in sorted(all_turns)]
print(len(merged), merged[0]['seq'], merged[0]['date'], merged[-1]['seq'], merged[-1]['date'])
from collections import defaultdict
sess_all = defaultdict(lambda: {'dates': set(), 'n': 0, 'first_seq': None, 'last_seq': None})
for r in merged:
    d = sess_all[r['step_index']]
    d['dates'].add(r['date'])
    d['n'] += 1
    if d['first_seq'] is None:
        d['first_seq'] = r['seq']
    d['last_seq'] = r['seq']
for s in sorted(sess_all):
    print(s, sorted(sess_all[s]['dates']), sess_all[s]['n'], sess_all[s]['first_seq'], sess_all[s]['last_seq'])
""",
    ),
    (
        "24",
        """\
from collections import defaultdict
sess_turns = defaultdict(list)
for r in merged:
    sess_turns[r['step_index']].append(r)
for s in sorted(sess_turns):
    users = [r for r in sess_turns[s] if r['role'] == 'user']
    print(f"=== Session {s} ({users[0]['date']}) -- {len(users)} user turns ===")
    for r in users[:3] + users[-2:]:
        txt = r['preview'].replace('[Session', '[S').replace('] user:', '] U:')
        print(f"{r['seq']}: {txt[:160]}")
    print()
""",
    ),
    (
        "25",
        """\
import json
def full_content(seq):
    rr = ms.sql_query("SELECT content FROM hist.conversation_history WHERE seq = ?", (seq,))
    return rr[0]['content'] if rr else None
for s in [61, 63, 66, 70, 76, 77, 80]:
    ut = [r for r in sess_turns[s] if r['role'] == 'user']
    print(f"\\n########## SESSION {s} ({ut[0]['date']}) ##########")
    for r in ut[:6]:
        c = full_content(r['seq'])
        print(f"\\n--- seq {r['seq']} ---")
        print(c[:600])
""",
    ),
    (
        "26",
        """\
hits = []
for q in ["personal growth", "lessons learned", "personal growth trip", "growth", "changed me", "learned about myself"]:
    hits += ms.search(q, seq_range=(13611, 18058), scope='task', k=6)
seen = {}
for h in hits:
    if h['seq'] not in seen:
        seen[h['seq']] = h
print(len(seen))
for seq, h in sorted(seen.items()):
    print(seq, h.get('snippet', '')[:160].replace('\\n', ' '))
""",
    ),
    (
        "27",
        """\
rows = ms.expand([15138, 15489, 16441, 16678, 16824, 17216, 17712, 17932])
for r in rows:
    print(f"=== seq {r['seq']} | role={r['role']} ===")
    print(r['content'][:900])
    print()
""",
    ),
    (
        "28",
        """\
rows = ms.expand([16009, 16018])
for r in rows:
    print(f"=== seq {r['seq']} | role={r['role']} ===")
    print(r['content'][:800])
    print()
hits2 = ms.search("Pittsburgh delay", seq_range=(13611, 18058), scope='task', k=5)
for h in hits2:
    print("HIT", h['seq'], h.get('snippet', '')[:200].replace('\\n', ' '))
hits3 = ms.search("food overspend", seq_range=(13611, 18058), scope='task', k=5)
for h in hits3:
    print("HIT", h['seq'], h.get('snippet', '')[:200].replace('\\n', ' '))
""",
    ),
    (
        "29",
        """\
r1 = ms.sql_query("SELECT content FROM hist.conversation_history WHERE seq=16685")
print(r1[0]['content'][:500])
r2 = ms.sql_query("SELECT content FROM hist.conversation_history WHERE seq=17712")
""",
    ),
]
