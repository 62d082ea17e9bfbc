-- The catalogue's stock, and the orders taken against it.
CREATE TABLE stock (
    sku         text PRIMARY KEY,
    available   integer NOT NULL CHECK (available >= 0),
    price_minor bigint  NOT NULL CHECK (price_minor > 0),
    currency    text    NOT NULL DEFAULT 'EUR'
);

INSERT INTO stock (sku, available, price_minor) VALUES
    ('sku-42', 7, 999),
    ('sku-7', 120, 2500);

CREATE TABLE orders (
    id              bigserial PRIMARY KEY,
    sku             text    NOT NULL REFERENCES stock (sku),
    quantity        integer NOT NULL CHECK (quantity > 0),
    amount_minor    bigint  NOT NULL,
    currency        text    NOT NULL,
    email           text    NOT NULL,
    customer        text    NOT NULL,          -- the token's subject
    idempotency_key text,                      -- the client's Idempotency-Key, when it sent one
    status          text    NOT NULL DEFAULT 'pending',   -- pending, then paid
    created_at      timestamptz NOT NULL DEFAULT now(),
    UNIQUE (customer, idempotency_key)
);
---- create above / drop below ----
DROP TABLE orders;
DROP TABLE stock;
