// Logging for the CLI: human-readable lines on stderr (stdout stays for results and --json).
import * as winston from 'winston';

export type LogLevel = 'error' | 'warn' | 'info' | 'debug';

export function createLogger(level: LogLevel = 'info'): winston.Logger {
  return winston.createLogger({
    level,
    transports: [
      new winston.transports.Console({
        stderrLevels: ['error', 'warn', 'info', 'debug'],
        format: winston.format.combine(
          winston.format.timestamp({ format: 'HH:mm:ss' }),
          winston.format.printf((i) => `${String(i.timestamp)} ${i.level} ${String(i.message)}`),
        ),
      }),
    ],
  });
}
