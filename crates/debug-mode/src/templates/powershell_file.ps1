#region agent log
$script:AgentDebugAppendPath = '__APPEND_PATH__'
function ConvertTo-AgentDebugSafe {
    param($Value, [int]$Depth = 0)
    if ($Depth -gt 8) { return '[depth limit]' }
    if ($null -eq $Value) { return $null }
    if ($Value -is [string]) {
        if ($Value.Length -gt 2000) { return $Value.Substring(0, 2000) + '…' }
        return $Value
    }
    if ($Value -is [bool] -or $Value -is [int] -or $Value -is [long] -or $Value -is [decimal]) { return $Value }
    if ($Value -is [double] -or $Value -is [single]) {
        if ([double]::IsNaN($Value) -or [double]::IsInfinity($Value)) { return [string]$Value }
        return $Value
    }
    if ($Value -is [System.Management.Automation.PSCustomObject]) {
        $table = [ordered]@{}
        foreach ($p in $Value.PSObject.Properties) { $table[$p.Name] = $p.Value }
        $Value = $table
    }
    if ($Value -is [System.Collections.IDictionary]) {
        $out = [ordered]@{}
        $count = 0
        foreach ($key in $Value.Keys) {
            if ($count++ -ge 100) { break }
            $name = [string]$key
            if (($name.ToLowerInvariant() -replace '[^a-z0-9]', '') -cmatch '^(?:pwd|auth|sid|jwt|otp|pin)$|(?:password|passwd|passphrase|secret|token|apikey|authorization|cookies?|privatekey|accesskey|credentials?|signature|sessionid)$') {
                $out[$name] = '[REDACTED]'
            } else {
                $out[$name] = ConvertTo-AgentDebugSafe -Value $Value[$key] -Depth ($Depth + 1)
            }
        }
        return $out
    }
    if ($Value -is [System.Collections.IEnumerable]) {
        $items = [System.Collections.Generic.List[object]]::new()
        foreach ($item in $Value) {
            if ($items.Count -ge 100) { break }
            $items.Add((ConvertTo-AgentDebugSafe -Value $item -Depth ($Depth + 1)))
        }
        return , $items.ToArray()
    }
    return [string]$Value
}
function Write-AgentDebugLog {
    param([string]$HypothesisId, [string]$Location, [string]$Message, $Data)
    try {
        $event = [ordered]@{
            hypothesisId = $HypothesisId
            location     = $Location
            message      = $Message
            data         = (ConvertTo-AgentDebugSafe -Value $Data)
            timestamp    = [DateTimeOffset]::UtcNow.ToUnixTimeMilliseconds()
        }
        $line = ConvertTo-Json -InputObject $event -Compress -Depth 12
        [System.IO.File]::AppendAllText($script:AgentDebugAppendPath, $line + "`n", [System.Text.UTF8Encoding]::new($false))
    } catch {
        # A failed observation must never change control flow.
    }
}
#endregion
