-- One invoice per order, numbered by the order it bills; a payment settles it.
CREATE TABLE invoices (
    id           bigint PRIMARY KEY,            -- the order's id
    amount_minor bigint NOT NULL CHECK (amount_minor > 0),
    currency     text   NOT NULL,
    status       text   NOT NULL DEFAULT 'paid',
    created_at   timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE payments (
    id           bigserial PRIMARY KEY,
    invoice_id   bigint NOT NULL REFERENCES invoices (id),
    amount_minor bigint NOT NULL,
    currency     text   NOT NULL,
    payer        text   NOT NULL,               -- the token's subject
    created_at   timestamptz NOT NULL DEFAULT now()
);
---- create above / drop below ----
DROP TABLE payments;
DROP TABLE invoices;
