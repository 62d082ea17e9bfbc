// Package llm is how a jfast service calls model providers: chat
// completions, plain and streamed, through the official OpenAI Go SDK
// (github.com/openai/openai-go/v3), against OpenAI or any server speaking
// its API (vLLM, Ollama, LiteLLM, Azure OpenAI's compatible endpoint). One
// [Client] per provider per process gives every call jfast's policies: a
// connect timeout, a read gap for streams and a total deadline; retries of
// 5xx answers, failures to connect and silent streams within a retry budget
// (a stream only before its first chunk reached the caller); rate limits
// (429) waited for when the provider's Retry-After or x-ratelimit-reset-*
// fits the deadline, answered at once otherwise; a circuit breaker and a
// bulkhead per provider; and a fallback provider for a call the first
// refuses at once.
//
// Configure the providers in jfast.toml:
//
//	[plugins]
//	enabled = ["observability", "llm"]
//
//	[plugin.llm.providers.openai]
//	base_url = "https://api.openai.com/v1"
//	model = "gpt-4o-mini"
//	fallback = "local"          # optional
//
//	[plugin.llm.providers.local]
//	base_url = "http://127.0.0.1:11434/v1"
//	model = "llama3.2"
//
// with the key in the environment (JFAST_LLM_PROVIDERS__OPENAI__API_KEY),
// and take the client once, when mounting routes:
//
//	func routes(app *framework.App, r chi.Router) error {
//		gpt, err := llm.Provider(app, "openai")
//		if err != nil {
//			return err // unknown provider: the boot fails naming it
//		}
//		r.Method(http.MethodPost, "/ask", framework.Handler(func(w http.ResponseWriter, r *http.Request) error {
//			s, err := gpt.ChatStream(framework.StreamContext(r), openai.ChatCompletionNewParams{
//				Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("...")},
//			})
//			if err != nil {
//				return err // an *Error: 503 problem+json naming the provider
//			}
//			return llm.Relay(w, r, s) // server-sent events, chunk by chunk
//		}))
//		return nil
//	}
//
// Every failure is an [*Error] naming the provider, which renders as
// problem+json: 503 for an outage or a rate limit (with Retry-After when
// the wait is known), 502 for a request the provider refused (400, 401,
// 404...). [Response.Provider], [Stream.Provider] and Relay's X-LLM-Provider
// header say which provider answered.
//
// Prompts and answers are never logged, never put in an error's text and
// never put on a span: traces carry the model, the token counts and the
// outcome only.
//
// docs/llm.md explains every key, its default and its reason, what is
// retried and why, the errors, the metrics, and what is tested.
package llm
