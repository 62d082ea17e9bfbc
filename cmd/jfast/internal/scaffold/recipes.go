package scaffold

import "github.com/jfastframework/jfast/internal/roster"

// recipe is what jfast new adds to a service for one plugin: the example route and
// its test (templates recipes/<name>.go.tmpl and recipes/<name>_test.go.tmpl), the
// keys jfast.toml sets for the example to boot, and the dependency's container in
// compose.yaml.
type recipe struct {
	// Name is the plugin's name in [plugins] enabled.
	Name string
	// Settings are the keys jfast.toml sets (uncommented), full key → TOML value.
	Settings map[string]string
	// Route is the example route, for the README.
	Route string
	// Compose is the dependency's service in compose.yaml ("" for none); Env the
	// variables the service gets in compose to reach it.
	Compose string
	Env     []string
	// Note is a line for the README about running against the dependency.
	Note string
	// NeedsOneOf lists plugins of which at least one must be chosen too.
	NeedsOneOf []string
}

// Import is the plugin's package.
func (r recipe) Import() string { return roster.Import(r.Name) }

// Ident is the name main.go uses for the plugin's package: its own.
func (r recipe) Ident() string { return r.Name }

// recipeList are the plugins jfast new knows how to add, in any order: recipes()
// returns them in the roster's (internal/roster), the order of [plugins] enabled.
var recipeList = []recipe{
	{
		Name: "http",
		Settings: map[string]string{
			"plugin.http.upstreams.example.base_url": `"http://127.0.0.1:8199"`,
		},
		Route: "`GET /upstream`: calls the `example` upstream's /status through the http plugin's client",
		Env:   []string{"JFAST_HTTP_UPSTREAMS__EXAMPLE__BASE_URL=http://example:8199"},
		Note:  "The `example` upstream is http://127.0.0.1:8199 in jfast.toml, a port nothing of jfast's listens on (until you start it, /upstream answers a 503 naming `example`); point it at your real upstream with `JFAST_HTTP_UPSTREAMS__EXAMPLE__BASE_URL`.",
	},
	{
		Name: "db",
		Settings: map[string]string{
			"plugin.db.url": `"postgres://app:app@127.0.0.1:15432/app?sslmode=disable"`,
		},
		Route: "`GET /db/now`: asks PostgreSQL for its clock through the db plugin's pool",
		Compose: `  postgres:
    image: postgres:17-alpine
    environment:
      POSTGRES_USER: app
      POSTGRES_PASSWORD: app
      POSTGRES_DB: app
    ports:
      - "127.0.0.1:15432:5432"
    healthcheck:
      test: ["CMD", "pg_isready", "-U", "app"]
      interval: 2s
      retries: 15
`,
		Env:  []string{"JFAST_DB_URL=postgres://app:app@postgres:5432/app?sslmode=disable"},
		Note: "PostgreSQL is `postgres://app:app@127.0.0.1:15432/app` in jfast.toml: the compose file's, published on host port 15432 so that it never takes the 5432 of a PostgreSQL already on the machine; set `JFAST_DB_URL` for another. The tests make a private database of their own on the machine's PostgreSQL (`jfasttest.PostgresAdminURL`: `$JFAST_TEST_PG_ADMIN_URL`, else postgres@127.0.0.1:5432) and drop it afterwards; without one they are skipped, saying why.",
	},
	{
		Name: "cache",
		Settings: map[string]string{
			"plugin.cache.url": `"redis://127.0.0.1:16379/0"`,
		},
		Route: "`GET /cache/greeting`: a value remembered in Redis for a minute (computed uncached while Redis is down)",
		Compose: `  redis:
    image: redis:7-alpine
    ports:
      - "127.0.0.1:16379:6379"
    healthcheck:
      test: ["CMD", "redis-cli", "ping"]
      interval: 2s
      retries: 15
`,
		Env:  []string{"JFAST_CACHE_URL=redis://redis:6379/0"},
		Note: "Redis is `redis://127.0.0.1:16379/0` in jfast.toml: the compose file's, published on host port 16379 so that it never takes the 6379 of a Redis already on the machine; set `JFAST_CACHE_URL` for another. Its keys start with the service's name (`key_prefix` defaults to app.name + \":\"), so they never mix with another service's on a shared Redis.",
	},
	{
		Name: "auth",
		Settings: map[string]string{
			"plugin.auth.mode":   `"hmac"`,
			"plugin.auth.secret": `"dev-only-not-a-secret"`,
		},
		Route: "`GET /me`: the caller's subject, for a valid bearer token (401 without one)",
		Env:   []string{"JFAST_AUTH_SECRET=replace-with-at-least-32-random-bytes"},
		Note:  "jfast.toml's HMAC secret is a development placeholder, too short for `env = \"production\"`, which refuses to boot with it: set `JFAST_AUTH_SECRET` (32 bytes or more) where the service runs.",
	},
	{
		Name: "storage",
		Settings: map[string]string{
			"plugin.storage.disks.files.driver": `"local"`,
			"plugin.storage.disks.files.root":   `"data/files"`,
		},
		Route: "`PUT` and `GET /files/{name}`: stores and reads back an object on the `files` disk",
		Note:  "The `files` disk is the local directory data/files (in the container, /home/nonroot/data/files on the `files` volume); set `JFAST_STORAGE_DISKS__FILES__ROOT` to move it.",
	},
	{
		// Jobs live in PostgreSQL (River, the default backend) or, when only the
		// cache plugin is chosen, in Redis (asynq); see choose.
		Name:       "queue",
		Settings:   map[string]string{},
		Route:      "`POST /greetings`: enqueues a `greet` job, which the service's workers run",
		Note:       "The queue's backend is PostgreSQL (the db plugin) unless only the cache plugin is chosen (Redis, `backend = \"redis\"`). The service works one queue named after itself (`[plugin.queue.queues.<name>]`), so services sharing a database or a Redis never take each other's jobs; the tests rename it to one of their own (`<name>-test-<random>`, in setup), so a running dev server never takes a test's jobs; on Redis the test deletes its queue when it ends. `go run . worker` runs only the jobs; with `workers = true` (the default) `serve` runs them too. Without the backend the /greetings test is skipped, saying why.",
		NeedsOneOf: []string{"db", "cache"},
	},
	{
		Name: "mail",
		Settings: map[string]string{
			"plugin.mail.from": `"Example <noreply@example.com>"`,
		},
		Route:      "`POST /welcome`: sends a welcome mail through the queue (written to the log with the default `log` transport)",
		Note:       "Mail goes through the queue and, with `transport = \"log\"` (the default), to the log; set `transport = \"smtp\"`, `host`, `port` and `JFAST_MAIL_USERNAME`/`JFAST_MAIL_PASSWORD` to send it.",
		NeedsOneOf: []string{"queue"},
	},
	{
		Name:  "telemetry",
		Route: "`GET /trace`: the trace and span of the request, continuing a caller's W3C traceparent",
		Note:  "Spans go over OTLP/HTTP to https://localhost:4318/v1/traces (the OTLP exporter's default) unless `JFAST_TELEMETRY_ENDPOINT` (or `OTEL_EXPORTER_OTLP_ENDPOINT`) says otherwise; an unreachable collector never slows a request.",
	},
	{
		Name: "llm",
		Settings: map[string]string{
			"plugin.llm.providers.example.base_url": `"http://127.0.0.1:11434/v1"`,
			"plugin.llm.providers.example.model":    `"llama3.2"`,
		},
		Route: "`GET /ask?q=...`: asks the `example` model provider through the llm plugin (a 503 naming it while it is away)",
		Env:   []string{"JFAST_LLM_PROVIDERS__EXAMPLE__BASE_URL=http://ollama:11434/v1"},
		Note:  "The `example` provider is an OpenAI-compatible server at http://127.0.0.1:11434/v1 (Ollama's) with the model `llama3.2`; point it elsewhere with `JFAST_LLM_PROVIDERS__EXAMPLE__BASE_URL` and give a key with `JFAST_LLM_PROVIDERS__EXAMPLE__API_KEY`.",
	},
	{
		Name: "grpc",
		Settings: map[string]string{
			"plugin.grpc.server.listen":                        `"127.0.0.1:9100"`,
			"plugin.grpc.upstreams.example.target":             `"127.0.0.1:9100"`,
			"plugin.grpc.upstreams.example.insecure":           `true`,
			"plugin.grpc.upstreams.example.idempotent_methods": `["/example.v1.Greeter/Greet"]`,
		},
		Route: "`GET /grpc/greet?name=`: calls Greet on the `example` upstream through the grpc plugin's client; the service serves `example.v1.Greeter/Greet` on its gRPC listener",
		Env:   []string{"JFAST_GRPC_SERVER__LISTEN=0.0.0.0:9100"},
		Note:  "The gRPC server listens on 127.0.0.1:9100 (`JFAST_GRPC_SERVER__LISTEN`), a port none of jfast's examples uses, and the `example` upstream is the service itself, so /grpc/greet works at once; point it at your real upstream with `JFAST_GRPC_UPSTREAMS__EXAMPLE__TARGET`. Greeter uses the well-known StringValue, so the example needs no .proto file; a real service generates its own code and registers it the same way. The tests make the server listen on a free port.",
	},
	{
		// Keys are kept in PostgreSQL (the default store) or, when only the cache
		// plugin is chosen, in Redis; see choose.
		Name:       "idempotency",
		Settings:   map[string]string{},
		Route:      "`POST /payments`: runs once per Idempotency-Key; a retry gets the stored response",
		Note:       "The idempotency store is PostgreSQL (the db plugin) unless only the cache plugin is chosen (Redis, `store = \"redis\"`). With PostgreSQL the /payments test runs on a private database; with Redis it is skipped, saying why, while the store answers the 503 naming it.",
		NeedsOneOf: []string{"db", "cache"},
	},
}

// recipes returns the recipes in the roster's order.
func recipes() []recipe {
	var out []recipe
	for _, name := range roster.Names {
		if r, ok := recipeFor(name); ok {
			out = append(out, r)
		}
	}
	return out
}

func recipeFor(name string) (recipe, bool) {
	for _, r := range recipeList {
		if r.Name == name {
			return r, true
		}
	}
	return recipe{}, false
}

// Known lists the plugins jfast new has an example for, in the roster's order.
func Known() []string {
	var names []string
	for _, r := range recipes() {
		names = append(names, r.Name)
	}
	return names
}
