#!/usr/bin/env python3
"""Generates a TPC-C-like SQL script for the sqlite3 CLI (bench/README.md).

    gen_tpcc.py WAREHOUSES TRANSACTIONS [SEED] > tpcc.sql

Schema and load as TPC-C (warehouse, district, customer, history, orders,
new_order, order_line, item, stock; scaled: 10 districts per warehouse, 300
customers per district, 2000 items), then TRANSACTIONS transactions in the
TPC-C mix: new-order 45%, payment 43%, order-status 4%, delivery 4%,
stock-level 4%, each in BEGIN…COMMIT. Rollback-journal mode (SQLite's
default), so every commit writes and deletes the journal. Deterministic for a
given seed. Not a TPC-C implementation (no terminals, keying or think times).
"""
import random
import sys

DISTRICTS, CUSTOMERS, ITEMS = 10, 300, 2000


def pad(rng: random.Random, n: int) -> str:
    return "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(n))


def main() -> int:
    if len(sys.argv) not in (3, 4):
        print(__doc__, file=sys.stderr)
        return 2
    w, t = int(sys.argv[1]), int(sys.argv[2])
    rng = random.Random(int(sys.argv[3]) if len(sys.argv) == 4 else 7)
    out = sys.stdout
    out.write("PRAGMA page_size=4096;\nPRAGMA journal_mode=DELETE;\nPRAGMA synchronous=FULL;\nPRAGMA cache_size=-2000;\n")
    out.write("""CREATE TABLE warehouse(w_id INTEGER PRIMARY KEY, w_name TEXT, w_street TEXT, w_tax REAL, w_ytd REAL);
CREATE TABLE district(d_w_id INT, d_id INT, d_name TEXT, d_street TEXT, d_tax REAL, d_ytd REAL, d_next_o_id INT, PRIMARY KEY(d_w_id, d_id));
CREATE TABLE customer(c_w_id INT, c_d_id INT, c_id INT, c_last TEXT, c_data TEXT, c_balance REAL, c_ytd_payment REAL, c_payment_cnt INT, c_delivery_cnt INT, PRIMARY KEY(c_w_id, c_d_id, c_id));
CREATE TABLE history(h_c_id INT, h_d_id INT, h_w_id INT, h_amount REAL, h_data TEXT);
CREATE TABLE orders(o_w_id INT, o_d_id INT, o_id INT, o_c_id INT, o_carrier_id INT, o_ol_cnt INT, PRIMARY KEY(o_w_id, o_d_id, o_id));
CREATE TABLE new_order(no_w_id INT, no_d_id INT, no_o_id INT, PRIMARY KEY(no_w_id, no_d_id, no_o_id));
CREATE TABLE order_line(ol_w_id INT, ol_d_id INT, ol_o_id INT, ol_number INT, ol_i_id INT, ol_quantity INT, ol_amount REAL, ol_dist_info TEXT, ol_delivery_d INT, PRIMARY KEY(ol_w_id, ol_d_id, ol_o_id, ol_number));
CREATE TABLE item(i_id INTEGER PRIMARY KEY, i_name TEXT, i_price REAL, i_data TEXT);
CREATE TABLE stock(s_w_id INT, s_i_id INT, s_quantity INT, s_ytd INT, s_order_cnt INT, s_data TEXT, PRIMARY KEY(s_w_id, s_i_id));
""")
    out.write("BEGIN;\n")
    for i in range(1, ITEMS + 1):
        out.write(f"INSERT INTO item VALUES({i},'{pad(rng, 14)}',{rng.randrange(100, 10000) / 100},'{pad(rng, 40)}');\n")
    next_o = {}
    for wi in range(1, w + 1):
        out.write(f"INSERT INTO warehouse VALUES({wi},'w{wi}','{pad(rng, 20)}',0.1,300000);\n")
        for i in range(1, ITEMS + 1):
            out.write(f"INSERT INTO stock VALUES({wi},{i},{rng.randrange(10, 100)},0,0,'{pad(rng, 50)}');\n")
        for d in range(1, DISTRICTS + 1):
            out.write(f"INSERT INTO district VALUES({wi},{d},'d{d}','{pad(rng, 20)}',0.05,30000,1);\n")
            next_o[(wi, d)] = 1
            for c in range(1, CUSTOMERS + 1):
                out.write(f"INSERT INTO customer VALUES({wi},{d},{c},'{pad(rng, 8)}','{pad(rng, 300)}',-10,10,1,0);\n")
    out.write("COMMIT;\n")
    undelivered = {k: [] for k in next_o}
    for _ in range(t):
        x = rng.random()
        wi, d = rng.randrange(1, w + 1), rng.randrange(1, DISTRICTS + 1)
        c = rng.randrange(1, CUSTOMERS + 1)
        out.write("BEGIN;\n")
        if x < 0.45:  # new-order
            o = next_o[(wi, d)]
            next_o[(wi, d)] = o + 1
            n = rng.randrange(5, 16)
            out.write(f"UPDATE district SET d_next_o_id=d_next_o_id+1 WHERE d_w_id={wi} AND d_id={d};\n")
            out.write(f"INSERT INTO orders VALUES({wi},{d},{o},{c},NULL,{n});\n")
            out.write(f"INSERT INTO new_order VALUES({wi},{d},{o});\n")
            for ln in range(1, n + 1):
                i = rng.randrange(1, ITEMS + 1)
                q = rng.randrange(1, 11)
                out.write(f"UPDATE stock SET s_quantity=CASE WHEN s_quantity>{q}+10 THEN s_quantity-{q} ELSE s_quantity-{q}+91 END, s_ytd=s_ytd+{q}, s_order_cnt=s_order_cnt+1 WHERE s_w_id={wi} AND s_i_id={i};\n")
                out.write(f"INSERT INTO order_line VALUES({wi},{d},{o},{ln},{i},{q},(SELECT i_price FROM item WHERE i_id={i})*{q},'{pad(rng, 24)}',NULL);\n")
            undelivered[(wi, d)].append(o)
        elif x < 0.88:  # payment
            h = rng.randrange(100, 500000) / 100
            out.write(f"UPDATE warehouse SET w_ytd=w_ytd+{h} WHERE w_id={wi};\n")
            out.write(f"UPDATE district SET d_ytd=d_ytd+{h} WHERE d_w_id={wi} AND d_id={d};\n")
            out.write(f"UPDATE customer SET c_balance=c_balance-{h}, c_ytd_payment=c_ytd_payment+{h}, c_payment_cnt=c_payment_cnt+1, c_data=substr('{pad(rng, 30)}' || c_data, 1, 300) WHERE c_w_id={wi} AND c_d_id={d} AND c_id={c};\n")
            out.write(f"INSERT INTO history VALUES({c},{d},{wi},{h},'{pad(rng, 20)}');\n")
        elif x < 0.92:  # order-status
            out.write(f"SELECT o_id, o_carrier_id FROM orders WHERE o_w_id={wi} AND o_d_id={d} AND o_c_id={c} ORDER BY o_id DESC LIMIT 1;\n")
        elif x < 0.96:  # delivery: the oldest new order of every district
            carrier = rng.randrange(1, 11)
            for dd in range(1, DISTRICTS + 1):
                q = undelivered[(wi, dd)]
                if not q:
                    continue
                o = q.pop(0)
                out.write(f"DELETE FROM new_order WHERE no_w_id={wi} AND no_d_id={dd} AND no_o_id={o};\n")
                out.write(f"UPDATE orders SET o_carrier_id={carrier} WHERE o_w_id={wi} AND o_d_id={dd} AND o_id={o};\n")
                out.write(f"UPDATE order_line SET ol_delivery_d={o} WHERE ol_w_id={wi} AND ol_d_id={dd} AND ol_o_id={o};\n")
                out.write(f"UPDATE customer SET c_balance=c_balance+(SELECT sum(ol_amount) FROM order_line WHERE ol_w_id={wi} AND ol_d_id={dd} AND ol_o_id={o}), c_delivery_cnt=c_delivery_cnt+1 WHERE c_w_id={wi} AND c_d_id={dd} AND c_id=(SELECT o_c_id FROM orders WHERE o_w_id={wi} AND o_d_id={dd} AND o_id={o});\n")
        else:  # stock-level
            out.write(f"SELECT count(DISTINCT s_i_id) FROM order_line, stock WHERE ol_w_id={wi} AND ol_d_id={d} AND ol_o_id>=(SELECT d_next_o_id-20 FROM district WHERE d_w_id={wi} AND d_id={d}) AND s_w_id={wi} AND s_i_id=ol_i_id AND s_quantity<15;\n")
        out.write("COMMIT;\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
