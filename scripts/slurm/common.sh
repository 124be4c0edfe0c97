# Start-or-resume logic shared by the evogan Slurm templates (sourced, not run).
#
# run_or_resume COMMAND CONFIG RUN [ARGS...]: start RUN from CONFIG when it does not exist yet
# (ARGS, the arguments given to the template, go to evogan then: `sbatch
# scripts/slurm/train.sbatch --set trainer.epochs=40 trainer.device=cuda`), resume it
# when its status.json says "stopped" (a clean stop on SIGTERM) or "running" with the stop
# signal that its launcher then killed it after (as evogan resumes it without --force), do
# nothing when "finished", and refuse "failed", any other "running" (a crash, or a process
# killed without a signal) or a damaged status.json: look at the log, then resume by hand with
# --force. A resume takes the run's own config.yaml, which holds the ARGS it started with, so
# they are not given again. Exit code 75 (stopped, resumable) requeues the job (#SBATCH
# --requeue), which runs this script again with the same ARGS and so resumes the run.

EVOGAN=${EVOGAN:-python -m evogan}

run_status() {
    if [[ ! -f "$1/config.yaml" ]]; then
        echo new
    elif [[ -f "$1/status.json" ]]; then
        python -c 'import json, sys; r = json.load(open(sys.argv[1]))
print("stopped" if r["status"] == "running" and "signal" in r else r["status"])' \
            "$1/status.json" 2>/dev/null || echo damaged
    else
        echo stopped  # made by an evogan without status.json: resumable from its checkpoints
    fi
}

run_or_resume() {
    local command=$1 config=$2 run=$3 status code
    shift 3
    local given="$*"
    status=$(run_status "$run")
    case "$status" in
        new)
            echo "starting $run from $config${given:+ with $given}"
            set -- $EVOGAN "$command" "$config" --run-dir "$run" "$@" ;;
        stopped)
            local holds=${given:+ with its own config.yaml, which holds $given}
            echo "resuming $run (restart ${SLURM_RESTART_COUNT:-0})$holds"
            set -- $EVOGAN "$command" --resume "$run" ;;
        finished)
            echo "$run is finished; nothing to do"
            return 0 ;;
        *)
            echo "$run has status '$status' (a crash or a kill without a clean stop); read" \
                "the job log, then resume by hand: $EVOGAN $command --resume $run --force" >&2
            return 1 ;;
    esac
    set +e
    srun --kill-on-bad-exit=1 "$@"
    code=$?
    set -e
    if [[ $code -eq 75 ]]; then
        echo "$run stopped resumably (exit 75); requeueing job $SLURM_JOB_ID"
        scontrol requeue "$SLURM_JOB_ID"
    fi
    return $code
}
