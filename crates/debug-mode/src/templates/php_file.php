// #region agent log
if (!function_exists('agent_debug_log')) {
    function agent_debug_sanitize($value, $depth = 0)
    {
        if ($depth > 8) {
            return '[depth limit]';
        }
        if (is_null($value) || is_bool($value) || is_int($value)) {
            return $value;
        }
        if (is_float($value)) {
            return is_finite($value) ? $value : (string) $value;
        }
        if (is_string($value)) {
            return strlen($value) > 2000 ? substr($value, 0, 2000) . '…' : $value;
        }
        if (is_object($value)) {
            $value = $value instanceof \JsonSerializable ? $value->jsonSerialize() : get_object_vars($value);
            if (!is_array($value)) {
                return agent_debug_sanitize($value, $depth + 1);
            }
        }
        if (is_array($value)) {
            $isList = $value === [] || array_keys($value) === range(0, count($value) - 1);
            $out = [];
            $count = 0;
            foreach ($value as $key => $item) {
                if ($count++ >= 100) {
                    break;
                }
                if (!$isList && preg_match('/^(?:pwd|auth|sid|jwt|otp|pin)$|(?:password|passwd|passphrase|secret|token|apikey|authorization|cookies?|privatekey|accesskey|credentials?|signature|sessionid)$/', preg_replace('/[^a-z0-9]/', '', strtolower((string) $key)))) {
                    $out[(string) $key] = '[REDACTED]';
                } else {
                    $out[$isList ? $key : (string) $key] = agent_debug_sanitize($item, $depth + 1);
                }
            }
            return $isList ? $out : (object) $out;
        }
        return gettype($value);
    }

    function agent_debug_log($hypothesisId, $location, $message, $data = null)
    {
        try {
            $line = json_encode([
                'hypothesisId' => $hypothesisId,
                'location' => $location,
                'message' => $message,
                'data' => agent_debug_sanitize($data),
                'timestamp' => (int) floor(microtime(true) * 1000),
            ], JSON_UNESCAPED_SLASHES | JSON_UNESCAPED_UNICODE | JSON_INVALID_UTF8_SUBSTITUTE | JSON_PARTIAL_OUTPUT_ON_ERROR);
            if ($line !== false) {
                @file_put_contents('__APPEND_PATH__', $line . "\n", FILE_APPEND | LOCK_EX);
            }
        } catch (\Throwable $e) {
            // A failed observation must never change control flow.
        }
    }
}
// #endregion
