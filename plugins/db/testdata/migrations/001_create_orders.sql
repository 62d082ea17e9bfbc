CREATE TABLE orders (id bigserial PRIMARY KEY, total bigint NOT NULL);
---- create above / drop below ----
DROP TABLE orders;
