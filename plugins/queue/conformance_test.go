package queue_test

import (
	"testing"

	"github.com/jfastframework/jfast/plugins/queue/queuetest"
)

func TestConformancePostgres(t *testing.T) {
	t.Parallel()
	queuetest.Run(t, harness("postgres"))
}

func TestConformanceRedis(t *testing.T) {
	t.Parallel()
	queuetest.Run(t, harness("redis"))
}
