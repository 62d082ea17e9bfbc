package main

import (
	"github.com/jfastframework/jfast/framework"
	"github.com/jfastframework/jfast/plugins/auth"
	"github.com/jfastframework/jfast/plugins/cache"
	"github.com/jfastframework/jfast/plugins/channels"
	"github.com/jfastframework/jfast/plugins/db"
	"github.com/jfastframework/jfast/plugins/gateway"
	"github.com/jfastframework/jfast/plugins/grpc"
	"github.com/jfastframework/jfast/plugins/http"
	"github.com/jfastframework/jfast/plugins/idempotency"
	"github.com/jfastframework/jfast/plugins/llm"
	"github.com/jfastframework/jfast/plugins/mail"
	"github.com/jfastframework/jfast/plugins/queue"
	"github.com/jfastframework/jfast/plugins/storage"
	"github.com/jfastframework/jfast/plugins/telemetry"
)

// builtin are the plugins compiled into the jfast binary, so `jfast check` and
// `jfast config` understand their tables and `jfast new` can read their defaults:
// every plugin of the roster (internal/roster) but observability, which the
// framework always carries. TestBuiltinIsTheRoster fails while they differ.
// The queue is a standInQueue: the binary works no queue (errNoHandlers).
var builtin = map[string]func() framework.Plugin{
	"http":        func() framework.Plugin { return http.New() },
	"db":          func() framework.Plugin { return db.New() },
	"cache":       func() framework.Plugin { return cache.New() },
	"auth":        func() framework.Plugin { return auth.New() },
	"storage":     func() framework.Plugin { return storage.New() },
	"idempotency": func() framework.Plugin { return idempotency.New() },
	"queue":       func() framework.Plugin { return standInQueue{queue.New()} },
	"telemetry":   func() framework.Plugin { return telemetry.New() },
	"mail":        func() framework.Plugin { return mail.New() },
	"channels":    func() framework.Plugin { return channels.New() },
	"grpc":        func() framework.Plugin { return grpc.New() },
	"gateway":     func() framework.Plugin { return gateway.New() },
	"llm":         func() framework.Plugin { return llm.New() },
}
