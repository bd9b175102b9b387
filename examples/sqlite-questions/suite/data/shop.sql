-- A small online shop, January to April 2024. SQLite.
-- Build a database from it with:  sqlite3 shop.db < shop.sql
--
-- Amounts are integer cents. An order's status is one of:
--   paid       charged, not shipped yet
--   shipped    charged and shipped
--   cancelled  cancelled before it was charged
--   refunded   charged, then the money went back
-- Orders from guest checkouts have no customer (customer_id is NULL).
-- order_items.discount_pct is NULL when the line had no discount.

CREATE TABLE customers (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    city TEXT,            -- NULL when the customer did not say
    joined TEXT NOT NULL  -- YYYY-MM-DD
);

CREATE TABLE products (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    category TEXT NOT NULL,
    price_cents INTEGER NOT NULL
);

CREATE TABLE orders (
    id INTEGER PRIMARY KEY,
    customer_id INTEGER REFERENCES customers (id),  -- NULL for a guest checkout
    placed TEXT NOT NULL,                           -- YYYY-MM-DD
    status TEXT NOT NULL CHECK (status IN ('paid', 'shipped', 'cancelled', 'refunded'))
);

CREATE TABLE order_items (
    order_id INTEGER NOT NULL REFERENCES orders (id),
    product_id INTEGER NOT NULL REFERENCES products (id),
    quantity INTEGER NOT NULL,
    discount_pct INTEGER  -- percent off this line's price; NULL means none
);

INSERT INTO customers VALUES
    (1, 'Ines Duarte', 'Lisbon', '2023-02-11'),
    (2, 'Tomasz Wojcik', 'Krakow', '2023-03-02'),
    (3, 'Amara Okafor', 'Lagos', '2023-05-19'),
    (4, 'Jonas Berg', 'Oslo', '2023-06-07'),
    (5, 'Mei Lin', 'Lisbon', '2023-08-23'),
    (6, 'Rafael Costa', 'Porto', '2023-09-14'),
    (7, 'Sofia Marin', NULL, '2023-11-30'),
    (8, 'Kwame Mensah', 'Lagos', '2024-01-05'),
    (9, 'Elena Rossi', 'Krakow', '2024-02-17'),
    (10, 'Noah Fischer', 'Oslo', '2024-03-28');

INSERT INTO products VALUES
    (1, 'Trail Mug', 'kitchen', 1800),
    (2, 'Pour-over Kettle', 'kitchen', 4500),
    (3, 'Spice Tin Set', 'kitchen', 2400),
    (4, 'Linen Apron', 'kitchen', 3200),
    (5, 'Canvas Tote', 'bags', 2200),
    (6, 'Roll-top Backpack', 'bags', 8900),
    (7, 'Hip Pack', 'bags', 3500),
    (8, 'Desk Lamp', 'home', 6400),
    (9, 'Wool Throw', 'home', 7800),
    (10, 'Plant Pot', 'home', 1500),
    (11, 'Field Notebook', 'stationery', 900),
    (12, 'Brass Pen', 'stationery', 5600);

INSERT INTO orders VALUES
    (1, 1, '2024-01-04', 'shipped'),
    (2, 2, '2024-01-06', 'shipped'),
    (3, 1, '2024-01-15', 'shipped'),
    (4, 3, '2024-01-19', 'cancelled'),
    (5, 4, '2024-01-22', 'shipped'),
    (6, 4, '2024-01-30', 'shipped'),
    (7, 5, '2024-02-02', 'shipped'),
    (8, 2, '2024-02-09', 'refunded'),
    (9, 6, '2024-02-14', 'shipped'),
    (10, 3, '2024-02-20', 'shipped'),
    (11, 7, '2024-02-26', 'paid'),
    (12, 1, '2024-03-01', 'shipped'),
    (13, 8, '2024-03-05', 'shipped'),
    (14, 4, '2024-03-11', 'cancelled'),
    (15, 6, '2024-03-16', 'paid'),
    (16, 5, '2024-03-21', 'shipped'),
    (17, 6, '2024-03-27', 'shipped'),
    (18, 2, '2024-04-02', 'paid'),
    (19, 3, '2024-04-08', 'shipped'),
    (20, 8, '2024-04-15', 'paid'),
    (21, 1, '2024-04-19', 'cancelled'),
    (22, 7, '2024-04-24', 'shipped');

INSERT INTO order_items VALUES
    (1, 1, 2, NULL), (1, 11, 3, NULL),
    (2, 6, 1, 10), (2, 5, 1, NULL),
    (3, 2, 1, NULL),
    (4, 9, 1, NULL), (4, 10, 2, NULL),
    (5, 8, 1, NULL), (5, 11, 2, NULL),
    (6, 5, 2, NULL),
    (7, 3, 1, 15), (7, 1, 1, NULL), (7, 4, 1, NULL),
    (8, 7, 1, NULL),
    (9, 9, 1, 20), (9, 10, 3, NULL),
    (10, 1, 4, NULL),
    (11, 6, 1, NULL), (11, 7, 1, NULL),
    (12, 8, 1, 10), (12, 2, 1, NULL),
    (13, 11, 5, NULL), (13, 5, 1, NULL),
    (14, 12, 1, NULL),
    (15, 10, 1, NULL), (15, 3, 2, NULL),
    (16, 4, 2, 25),
    (17, 6, 1, NULL), (17, 1, 2, NULL),
    (18, 8, 1, NULL),
    (19, 9, 1, NULL), (19, 11, 1, NULL),
    (20, 7, 2, 10),
    (21, 2, 1, NULL),
    (22, 1, 1, NULL), (22, 5, 1, NULL), (22, 10, 1, NULL);
