-- Every statement of the seed and of its removal starts with this: the
-- parameters, named once, and the seeded orders, one row each. The same
-- bind parameters go to every statement ($1 the order id prefix, $2 how
-- many orders, $3 every how many orders one is refunded in full and the
-- next in part, 0 for none, $4 and $5 the two SKUs, $6 when the first
-- order was created, $7 the customer id prefix).
WITH p AS (
    SELECT CAST($1 AS text) AS prefix, CAST($2 AS int) AS n, CAST($3 AS int) AS every,
           CAST($4 AS text) AS sku_a, CAST($5 AS text) AS sku_b,
           CAST($6 AS timestamptz) AS base, CAST($7 AS text) AS customer
), s AS (
    SELECT g, p.prefix || g AS id, p.customer || (g % 1000) AS customer,
           CASE WHEN p.every > 0 AND g % p.every = 0 THEN 'REFUNDED'
                WHEN p.every > 0 AND g % p.every = 1 THEN 'PARTIALLY_REFUNDED'
                ELSE 'PAID' END AS kind,
           p.base + g * interval '1 millisecond' AS t,
           p.sku_a, p.sku_b
    FROM p, generate_series(1, p.n) AS g
)
