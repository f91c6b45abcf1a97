// Daemon logging: structured JSON lines to a size-rotated file in the state directory, and
// human-readable lines on the console when running in the foreground.
import * as winston from 'winston';
import type { LogLevel } from '../common/log';

export function createDaemonLogger(file: string, options: { level?: LogLevel; console?: boolean } = {}): winston.Logger {
  const transports: winston.transport[] = [
    new winston.transports.File({
      filename: file,
      maxsize: 5 * 1024 * 1024,
      maxFiles: 3,
      tailable: true,
      format: winston.format.combine(winston.format.timestamp(), winston.format.json()),
    }),
  ];
  if (options.console) {
    transports.push(
      new winston.transports.Console({
        stderrLevels: ['error', 'warn', 'info', 'debug'],
        format: winston.format.combine(
          winston.format.timestamp({ format: 'HH:mm:ss' }),
          winston.format.printf((i) => {
            const { level, message, timestamp, ...rest } = i;
            const extra = Object.keys(rest).length ? ` ${JSON.stringify(rest)}` : '';
            return `${String(timestamp)} ${level} ${String(message)}${extra}`;
          }),
        ),
      }),
    );
  }
  return winston.createLogger({ level: options.level ?? 'info', transports });
}
