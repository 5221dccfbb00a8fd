// #region agent log
import (
	agentjson "encoding/json"
	agentos "os"
	agentregexp "regexp"
	agentstrings "strings"
	agenttime "time"
)

const agentDebugAppendPath = "__APPEND_PATH__"

// Secret key names, compared without case and separators: a short secret word as the whole
// name, or a name ending with a secret word (api_key, accessToken; not tokenCount).
var agentDebugSecret = agentregexp.MustCompile(`^(?:pwd|auth|sid|jwt|otp|pin)$|(?:password|passwd|passphrase|secret|token|apikey|authorization|cookies?|privatekey|accesskey|credentials?|signature|sessionid)$`)

func agentDebugSecretKey(key string) bool {
	norm := agentstrings.Map(func(r rune) rune {
		if r >= 'A' && r <= 'Z' {
			return r + ('a' - 'A')
		}
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			return r
		}
		return -1
	}, key)
	return agentDebugSecret.MatchString(norm)
}

func agentDebugSanitize(value any, depth int) any {
	if depth > 8 {
		return "[depth limit]"
	}
	switch v := value.(type) {
	case string:
		if len(v) > 2000 {
			return agentstrings.ToValidUTF8(v[:2000], "") + "…"
		}
		return v
	case []any:
		if len(v) > 100 {
			v = v[:100]
		}
		out := make([]any, len(v))
		for i, item := range v {
			out[i] = agentDebugSanitize(item, depth+1)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(v))
		count := 0
		for key, item := range v {
			if count >= 100 {
				break
			}
			count++
			if agentDebugSecretKey(key) {
				out[key] = "[REDACTED]"
			} else {
				out[key] = agentDebugSanitize(item, depth+1)
			}
		}
		return out
	default:
		return v
	}
}

func agentDebugLog(hypothesisID, location, message string, data any) {
	defer func() { _ = recover() }() // A failed observation must never change control flow.
	var generic any
	raw, err := agentjson.Marshal(data)
	if err != nil {
		return // unserializable (e.g. a cyclic value): a failed observation writes nothing
	}
	decoder := agentjson.NewDecoder(agentstrings.NewReader(string(raw)))
	decoder.UseNumber()
	if decoder.Decode(&generic) != nil {
		return
	}
	line, err := agentjson.Marshal(map[string]any{
		"hypothesisId": hypothesisID,
		"location":     location,
		"message":      message,
		"data":         agentDebugSanitize(generic, 0),
		"timestamp":    agenttime.Now().UnixMilli(),
	})
	if err != nil {
		return
	}
	f, err := agentos.OpenFile(agentDebugAppendPath, agentos.O_APPEND|agentos.O_CREATE|agentos.O_WRONLY, 0o600)
	if err != nil {
		return
	}
	defer f.Close()
	_, _ = f.Write(append(line, '\n'))
}
// #endregion
