-- catches: customers who placed no order dropped or miscounted (an inner join, or COUNT(*) after a LEFT JOIN)
INSERT INTO customers VALUES (90, 'Lena Park', 'Porto', '2024-04-30');
